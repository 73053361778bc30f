"""A dense layer with a dead unit: its kernel column and bias are exactly 0, so
its pre-activation is exactly 0 at every sample, on the relu's kink. A joint
direction that moves every weight moves that pre-activation by t (u_bias +
x u_kernel): the whole model is not differentiable at the point along it (the
one-sided slopes differ), and TensorFlow's relu gradient at 0 (0, the left or
the right piece) lies between them. The gradient is right."""

import numpy as np
import keras

features = keras.Input((3,))
hidden = keras.layers.Dense(4, name="d1")(features)
model = keras.Model(features, keras.layers.Dense(2, name="d2")(keras.layers.ReLU(name="relu")(hidden)), name="dead")
kernel, bias = model.get_layer("d1").get_weights()
kernel[:, 0] = 0.0
model.get_layer("d1").set_weights([kernel, np.zeros_like(bias)])


def inputs(rng):
    return {"x": rng.standard_normal((2, 3)).astype("float32")}
