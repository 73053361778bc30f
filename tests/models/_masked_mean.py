"""A user's pooling layer that averages the steps its Keras mask keeps, with
its gradient written by hand, after ``Masking`` and a ``Dense`` (which passes
the mask on), in a subclassed model. Step 2 of the first sequence is padding:
``Layer.__call__`` hands the layer ``mask`` from its input, and the layer
averages two steps there, three in the second sequence.

``right``: the gradient divides by the count of kept steps. The wrong twin
divides by every step: right wherever nothing is masked (so a check of the
layer without its mask passes it), a third too small on the first sequence
(1/3 where 1/2 is right: relative error 1/3).
"""

import keras
import numpy as np
import tensorflow as tf


x = np.random.default_rng(7).uniform(-1.0, 1.0, (2, 3, 2)).astype(np.float32)
x[0, 2] = 0.0  # padding


def model_with(right: bool):
    @tf.custom_gradient
    def masked_mean(x, weights):
        kept = tf.reduce_sum(weights, axis=1)  # [batch, 1]
        y = tf.reduce_sum(x * weights, axis=1) / kept

        def grad(dy):
            count = kept if right else tf.cast(tf.shape(x)[1], x.dtype) * tf.ones_like(kept)  # BUG when not right
            return dy[:, None, :] * weights / count[:, None, :], tf.zeros_like(weights)

        return y, grad

    class MaskedMean(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, x, mask=None):
            weights = tf.ones_like(x[..., :1]) if mask is None else tf.cast(mask, x.dtype)[..., None]
            return masked_mean(x, weights)

        def compute_mask(self, x, mask=None):
            return None  # the steps are averaged away

    class Net(keras.Model):
        def __init__(self):
            super().__init__(name="net")
            self.masking = keras.layers.Masking(0.0)
            self.dense = keras.layers.Dense(2, activation="tanh")
            self.pool = MaskedMean(name="masked_mean")

        def call(self, x):
            # Each call passes the mask on its tensor, as a subclassed model
            # does: Layer.__call__ fills in the pooling's ``mask`` from it.
            return self.pool(self.dense(self.masking(x)))

    keras.utils.set_random_seed(0)
    net = Net()
    net(x)
    return net

