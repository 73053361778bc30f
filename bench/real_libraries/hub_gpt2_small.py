"""keras-hub GPT2Backbone at GPT-2 small's shapes (12 layers, hidden 768,
50,257 tokens; 124.4M weights), random weights from its constructor, 32 tokens."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.GPT2Backbone(
    vocabulary_size=50257, num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072,
    max_sequence_length=1024, dropout=0.0,
)
inputs = {"token_ids": np.arange(1, 33).reshape(1, 32), "padding_mask": np.ones((1, 32), "int32")}
