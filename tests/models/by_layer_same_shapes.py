"""Three Dense layers of one shape (48 -> 48, tanh): the second and third are
units of one signature, each checked by random projections (2,352 weights,
over the full check's 2,048 elements)."""

import keras

keras.utils.set_random_seed(0)
model = keras.Sequential(
    [keras.Input((48,))] + [keras.layers.Dense(48, activation="tanh", name=f"dense_{i}") for i in range(3)],
    name="same_shapes",
)


def inputs(rng):
    return {"x": rng.standard_normal((2, 48))}
