"""keras-hub's GPT2Backbone, tiny (built from its constructor, no weights
downloaded): one decoder layer, hidden 8, a padded token. Every weight is
differentiated (the default)."""
import keras_hub
import numpy as np

model = keras_hub.models.GPT2Backbone(
    vocabulary_size=16, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
    max_sequence_length=8, dropout=0.0,
)
inputs = {"token_ids": np.array([[1, 2, 3, 4]]), "padding_mask": np.array([[1, 1, 1, 0]])}
