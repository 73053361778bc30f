"""A bilinear resize: right in reverse mode, and TensorFlow's forward mode
gives no JVP through it (ResizeBilinearGrad has no gradient, and forward mode
transposes the gradient): a named warning, never a wrong derivative. The
resize of a 2x2 image to 4x4 with half-pixel centres is linear: each output
is a fixed weighting of the inputs (output[0, 2, 2, 0] / x[0, 0, 0, 0] = 1/16)."""

import tensorflow as tf


def model(x):
    return tf.image.resize(x, (4, 4), method="bilinear")


inputs = {"x": [[[[0.1], [0.5]], [[0.9], [-0.3]]]]}
