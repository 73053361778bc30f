"""The unmodified twin of by_layer_modules.py (every gradient right): a network of tf.Modules trained with a loss: a stem, two residual blocks
(Dense -> Swish -> Dense, the block's __call__ a tf.function) and a head. The
second block's Swish has a custom gradient that is wrong (halved) where its
input exceeds 1, and right elsewhere; the first block's is right. The Swish
module is also called a second time, shared, on the head's output."""

import numpy as np
import tensorflow as tf

WRONG = False


def make_swish(wrong):
    @tf.custom_gradient
    def swish(x):
        s = tf.math.sigmoid(x)

        def grad(dy):
            true = s + x * s * (1 - s)
            return dy * (tf.where(x > 1.0, 0.5 * true, true) if wrong else true)

        return x * s, grad

    return swish


class Dense(tf.Module):
    def __init__(self, n_in, n_out, seed, name=None):
        super().__init__(name=name)
        rng = np.random.default_rng(seed)
        self.w = tf.Variable((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype("float32"))
        self.b = tf.Variable((0.1 * rng.standard_normal(n_out)).astype("float32"))

    def __call__(self, x):
        return x @ self.w + self.b


class Swish(tf.Module):
    def __init__(self, wrong, name=None):
        super().__init__(name=name)
        self.function = make_swish(wrong)

    def __call__(self, x):
        return self.function(x)


class Block(tf.Module):
    def __init__(self, width, seed, wrong, name=None):
        super().__init__(name=name)
        self.inner = Dense(width, width, seed)
        self.act = Swish(wrong)
        self.outer = Dense(width, width, seed + 1)

    @tf.function
    def __call__(self, x):
        return x + self.outer(self.act(self.inner(x)))


class Net(tf.Module):
    def __init__(self, wrong):
        super().__init__()
        self.stem = Dense(4, 8, 0)
        self.blocks = [Block(8, 1, False), Block(8, 3, wrong)]
        self.head = Dense(8, 3, 5)

    def __call__(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.blocks[0].act(self.head(h))


net = Net(WRONG)


def model(x, y):
    return tf.reduce_mean((net(x) - y) ** 2)


def inputs(rng):
    return {
        "x": 2.0 * rng.standard_normal((6, 4)).astype("float32"),
        "y": rng.standard_normal((6, 3)).astype("float32"),
    }
