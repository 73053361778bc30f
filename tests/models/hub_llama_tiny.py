"""keras-hub's LlamaBackbone, tiny (built from its constructor, no weights
downloaded): one decoder layer, grouped-query attention (2 query heads, 1
key-value head), rotary positions, RMS layer norms that compute in float32
whatever the input's dtype. Its ``reverse_embeddings`` (the untied LM head)
are not used by the backbone's output."""
import keras_hub
import numpy as np

model = keras_hub.models.LlamaBackbone(
    vocabulary_size=16, num_layers=1, num_query_heads=2, num_key_value_heads=1, hidden_dim=8,
    intermediate_dim=16, dropout=0.0,
)
inputs = {"token_ids": np.array([[1, 2, 3, 4]]), "padding_mask": np.array([[1, 1, 1, 0]])}
