"""keras-hub BertBackbone at BERT-base width (hidden 768, 12 heads, intermediate 3072), one layer, a
vocabulary of 100, seq 32, batch 1: one transformer layer of 7.1M weights for the layer pass."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.BertBackbone(
    vocabulary_size=100, num_layers=1, num_heads=12, hidden_dim=768, intermediate_dim=3072,
    max_sequence_length=32, dropout=0.0,
)
inputs = {
    "token_ids": (np.arange(1, 33) % 99 + 1).reshape(1, 32),
    "segment_ids": np.zeros((1, 32), "int32"),
    "padding_mask": np.ones((1, 32), "int32"),
}
