"""keras-hub BertBackbone at BERT-base's shapes (12 layers, hidden 768, 30,522
tokens; 109.5M weights), random weights from its constructor, 32 tokens."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.BertBackbone(
    vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072,
    max_sequence_length=512, dropout=0.0,
)
inputs = {
    "token_ids": np.arange(1, 33).reshape(1, 32),
    "segment_ids": np.zeros((1, 32), "int32"),
    "padding_mask": np.ones((1, 32), "int32"),
}
