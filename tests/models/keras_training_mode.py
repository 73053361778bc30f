"""A Keras model checked in training mode: its batch normalization uses the
batch's statistics and updates its moving ones when the model is called."""

import keras

training = True

features = keras.Input((5,))
hidden = keras.layers.BatchNormalization(name="norm")(keras.layers.Dense(6, name="d1")(features))
model = keras.Model(features, keras.layers.Dense(2, name="d2")(keras.activations.tanh(hidden)), name="trained")


def inputs(rng):
    return {"x": rng.standard_normal((8, 5)).astype("float32")}
