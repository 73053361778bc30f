"""keras-hub's BertBackbone, tiny (built from its constructor, no weights
downloaded): one encoder layer, hidden 8, two segments, a padded token. Its
pooled output reads the first token through ``pooled_dense``, which does not
reach ``sequence_output``."""
import keras_hub
import numpy as np

model = keras_hub.models.BertBackbone(
    vocabulary_size=16, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
    max_sequence_length=8, dropout=0.0,
)
inputs = {
    "token_ids": np.array([[1, 2, 3, 4]]),
    "segment_ids": np.array([[0, 0, 1, 1]]),
    "padding_mask": np.array([[1, 1, 1, 0]]),
}
