"""A ConvNeXt-style block: a depthwise 3x3 convolution written as a grouped
``Conv2D`` (``groups`` = channels), layer norm, a dense expansion with gelu.

Keras runs a grouped convolution on CPU inside a ``tf.function(jit_compile=True)``
(TensorFlow's CPU kernels have none); the model's graph with tf.function bodies
inlined loses that compilation, and grappler's fused Conv2D+BiasAdd refuses the
groups ("Fused conv implementation does not support grouped convolutions") when
TensorFlow runs without oneDNN, as gradcli imports it. Training steps run fine.
``keras_grouped_conv_wrong.py`` is its twin with a wrong gradient after the block.
"""

import keras
import numpy as np


def block(head=None):
    keras.utils.set_random_seed(0)
    features = keras.Input((6, 6, 4))
    y = keras.layers.Conv2D(4, 3, padding="same", groups=4, name="depthwise")(features)
    y = keras.layers.LayerNormalization(epsilon=1e-6)(y)
    y = keras.layers.Dense(6, activation="gelu")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    return keras.Model(features, head(y) if head else y)


model = block()
inputs = {"x": np.random.default_rng(0).uniform(-1.0, 1.0, (1, 6, 6, 4)).astype("float32")}
