"""keras-hub GPT2Backbone, 2 layers, hidden 32 (20,864 weights), 8 tokens."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.GPT2Backbone(
    vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
    max_sequence_length=16, dropout=0.0,
)
inputs = {"token_ids": np.array([[1, 2, 3, 4, 5, 6, 7, 8]]), "padding_mask": np.ones((1, 8), "int32")}
