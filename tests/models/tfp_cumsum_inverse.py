"""tfb.Cumsum's inverse, y_i - y_{i-1} (issue 35, item 11): eagerly its
shifted copy of y is computed in numpy (TensorFlow Probability's
prefer_static helpers use a value whenever it is known), so its reverse-mode
gradient by y_{i-1} is 0 where the derivative is -1. A real TFP bug."""

import tensorflow_probability as tfp

tfb = tfp.bijectors


def model(y):
    return tfb.Cumsum().inverse(y)


inputs = {"y": [0.3, 1.1, -0.4, 2.0]}
