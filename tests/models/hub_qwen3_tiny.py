"""keras-hub's Qwen3Backbone, tiny (built from its constructor, no weights
downloaded): one decoder layer, hidden 8, a padded token. Its RMS norms, its
query and key norms and its SiLU cast to float32 inside (``ops.cast(x,
"float32")``), which the float64 check keeps float64."""
import keras_hub
import numpy as np

model = keras_hub.models.Qwen3Backbone(
    vocabulary_size=16, num_layers=1, num_query_heads=2, num_key_value_heads=1, head_dim=4,
    hidden_dim=8, intermediate_dim=16,
)
inputs = {"token_ids": np.array([[1, 2, 3, 4]]), "padding_mask": np.array([[1, 1, 1, 0]])}
