"""keras-hub's FalconBackbone, tiny (built from its constructor, no weights
downloaded): one layer, hidden 8. Its attention builds its ``Softmax`` with
``dtype="float32"`` whatever the backbone's dtype: the float64 check must run
it in float64 (``keras_float64._float64_sublayers``)."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.FalconBackbone(
    vocabulary_size=16, num_layers=1, num_attention_heads=2, hidden_dim=8, intermediate_dim=16,
)
inputs = {"token_ids": np.array([[1, 2, 3, 4]]), "padding_mask": np.array([[1, 1, 1, 0]])}
