"""keras-hub's T5Backbone, tiny (built from its constructor, no weights
downloaded): it holds two distinct variables at the path
``self_attention/embeddings`` (the relative position biases of its encoder's
and its decoder's first self-attention), which gradcli names
``self_attention/embeddings-0`` and ``self_attention/embeddings-1``
(docs/model-files.md, "Weight names")."""
import keras_hub
import numpy as np

model = keras_hub.models.T5Backbone(
    vocabulary_size=11, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
    key_value_dim=4, dropout=0.0,
)
inputs = {
    "encoder_token_ids": np.array([[1, 2, 3]]),
    "encoder_padding_mask": np.array([[1, 1, 1]]),
    "decoder_token_ids": np.array([[4, 5]]),
    "decoder_padding_mask": np.array([[1, 1]]),
}
wrt = ["self_attention/embeddings-0", "self_attention/embeddings-1", "encoder_output_layer_norm/weight"]
