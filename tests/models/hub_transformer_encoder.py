"""keras-hub's TransformerEncoder, small (built from its constructor, no weights
downloaded), as a model file: its output for one sequence of 4 tokens of width 8,
checked with respect to the input and every weight of its attention and
feed-forward layers."""
import keras
import keras_hub
import numpy as np

model = keras_hub.layers.TransformerEncoder(intermediate_dim=8, num_heads=2, dropout=0.0)
model.build((1, 4, 8))


def inputs(rng: np.random.Generator):
    return {"inputs": rng.standard_normal((1, 4, 8))}
