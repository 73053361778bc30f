"""The benchmark function: an MLP loss (16-n-4, tanh, batch 8) as a model file.

No TensorFlow import here, so start-up benches can write the file cheaply."""

from __future__ import annotations

import os
import textwrap

#: layer widths (input, hidden, hidden, output): 16-n-4 with n giving the sizes
SIZES = {"1k": (16, 24, 20, 4), "6k": (16, 96, 44, 4), "10k": (16, 128, 60, 4), "43k": (16, 256, 150, 4)}
AUTO_SIZE = "6k"  # the size auto is run on (it must pick full within the default budget)
BATCH = 8
PARAMS = ("W1", "b1", "W2", "b2", "W3", "b3")

MODEL_FILE = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    WIDTHS = {widths}

    def model(W1, b1, W2, b2, W3, b3, x, y):
        h = tf.tanh(tf.matmul(x, W1) + b1)
        h = tf.tanh(tf.matmul(h, W2) + b2)
        return tf.reduce_mean((tf.matmul(h, W3) + b3 - y) ** 2)

    def inputs(rng):
        a, b, c, d = WIDTHS
        scale = lambda n: 1 / np.sqrt(n)
        return {{
            "W1": rng.standard_normal((a, b)) * scale(a), "b1": 0.1 * rng.standard_normal(b),
            "W2": rng.standard_normal((b, c)) * scale(b), "b2": 0.1 * rng.standard_normal(c),
            "W3": rng.standard_normal((c, d)) * scale(c), "b3": 0.1 * rng.standard_normal(d),
            "x": rng.standard_normal(({batch}, a)), "y": rng.standard_normal(({batch}, d)),
        }}

    wrt = {params}
    """
)


def write_model(widths, folder) -> str:
    path = os.path.join(folder, f"mlp_{'_'.join(map(str, widths))}.py")
    with open(path, "w") as f:
        f.write(MODEL_FILE.format(widths=widths, batch=BATCH, params=list(PARAMS)))
    return path


def torch_loss(x, y):
    """The same MLP loss in torch, for the peers (``x``, ``y``: the data tensors)."""
    import torch

    def f(W1, b1, W2, b2, W3, b3):
        h = torch.tanh(x @ W1 + b1)
        h = torch.tanh(h @ W2 + b2)
        return ((h @ W3 + b3 - y) ** 2).mean()

    return f
