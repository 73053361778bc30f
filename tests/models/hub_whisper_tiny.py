"""keras-hub's WhisperBackbone, tiny (built from its constructor, no weights
downloaded): one encoder and one decoder layer, hidden 8, 4 mel features. Its
constructor fixes the ``encoder_features`` Input at float32 whatever the
backbone's dtype: the float64 check must not round the features at the entry
(``keras_float64._float64_inputs``)."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
model = keras_hub.models.WhisperBackbone(
    vocabulary_size=16, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, num_mels=4,
    max_encoder_sequence_length=8, max_decoder_sequence_length=4, dropout=0.0,
)
inputs = {
    "encoder_features": np.random.default_rng(0).standard_normal((1, 8, 4)),
    "decoder_token_ids": np.array([[1, 2, 3, 4]]),
    "decoder_padding_mask": np.ones((1, 4), "int32"),
}
