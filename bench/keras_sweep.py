"""Keras' own code must pass: ``gradcli.check`` over Keras 3's ops, layers,
activations, losses and a few ``keras.applications`` networks (issue 28, item 10).

Every case is Keras code with no change, so every case should pass, except the
ones in ``REAL_BUGS``: TensorFlow kernels whose gradient is wrong or missing,
each with its evidence from independent truth (``evidence()``: a linear map's
exact Jacobian from its own forward pass, or TensorFlow's own "no gradient").
A case that fails and is not a real bug is a false alarm.

* ``ops``: ``keras.ops`` functions of one or two float32 inputs at seeded
  points inside their domain (``gradcli.check(f, inputs)``);
* ``layers``: a one-layer ``keras.Sequential`` (or a small functional model)
  with its weights, checked with respect to its input and its weights;
* ``activations``: ``keras.activations``, every public one;
* ``losses``: ``keras.losses`` classes as functions of ``y_pred`` at fixed
  ``y_true``;
* ``apps``: ``keras.applications`` networks, ``weights=None``, at the smallest
  input each accepts, batch 1, 10 classes, default options (auto mode, which
  runs the layer-by-layer pass when the full check does not fit the budget),
  written as model files in a temporary folder and checked by ``gradcli check
  FILE --json`` in a new process, as a user runs them (TensorFlow then comes
  from gradcli's import, without oneDNN, not from Keras'). Slow (1-5 minutes
  each): ``--groups apps`` alone, or left out with
  ``--groups ops,layers,activations,losses``.

Each case runs with the check's defaults (ConvNeXtTiny: ``--wrt x``, see
``APPLICATIONS``). Results: one JSON file under
``bench/results/`` (``keras_sweep-<UTC>.json``) and a Markdown table of the
failures and counts on stdout.

    python bench/keras_sweep.py [--groups ops,layers,...] [--only NAME...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

#: Cases whose failure is a real TensorFlow/Keras gradient bug, with the
#: evidence ``evidence()`` computes; every other failure is a false alarm.
_CHOLESKY = ("CholeskyGrad symmetrizes: Cholesky reads only the lower triangle (f is constant in the "
             "upper elements, to the last bit), its gradient there is not 0 (as bench/real_bugs/"
             "cholesky_lower_triangle.py)")
_RESIZE = ("ResizeBilinear has no forward mode: ForwardAccumulator returns None (taken as 0) for a "
           "map that is linear in the image (reverse mode is right)")
REAL_BUGS = {
    "ops.image.affine_transform": (
        "ImageProjectiveTransformV3's registered gradient (reverse mode) is not the transpose of "
        "its bilinear map"
    ),
    "ops.image.hsv_to_rgb": "HSVToRGB has no registered gradient",
    "ops.cholesky": _CHOLESKY,
    "ops.logdet": _CHOLESKY + "; tf.linalg.logdet differentiates through Cholesky",
    "ops.image.resize": _RESIZE,
    "layers.UpSampling2D": _RESIZE + " (UpSampling2D bilinear)",
    "layers.Resizing": _RESIZE + " (Resizing, bilinear)",
}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _u(shape, low=-2.0, high=2.0, seed=0):
    return _rng(seed).uniform(low, high, shape).astype(np.float32)


# --- keras.ops ---------------------------------------------------------------

def op_cases():
    import keras
    from keras import ops

    X = _u((3, 4))
    P = _u((3, 4), 0.2, 2.0, 1)  # positive
    U = _u((3, 4), -0.9, 0.9, 2)  # inside (-1, 1)
    G = _u((3, 4), 1.1, 3.0, 3)  # above 1
    Y = _u((3, 4), -2.0, 2.0, 4)
    A = _u((4, 4), -1.0, 1.0, 5)
    SPD = (A @ A.T + 4 * np.eye(4)).astype(np.float32)
    B = _u((4, 2), seed=6)
    IMG = _u((1, 6, 6, 3), 0.0, 1.0, 7)
    SEQ = _u((2, 8, 3), seed=8)
    K1 = _u((3, 3, 4), -0.5, 0.5, 9)
    K2 = _u((3, 3, 3, 4), -0.5, 0.5, 10)
    unary = {
        "abs": (ops.abs, X), "arccos": (ops.arccos, U), "arcsin": (ops.arcsin, U),
        "arctan": (ops.arctan, X), "arcsinh": (ops.arcsinh, X), "arccosh": (ops.arccosh, G),
        "arctanh": (ops.arctanh, U), "cos": (ops.cos, X), "cosh": (ops.cosh, X), "sin": (ops.sin, X),
        "sinh": (ops.sinh, X), "tan": (ops.tan, U), "tanh": (ops.tanh, X), "exp": (ops.exp, X),
        "exp2": (ops.exp2, X), "expm1": (ops.expm1, X), "log": (ops.log, P), "log1p": (ops.log1p, P),
        "log2": (ops.log2, P), "log10": (ops.log10, P), "sqrt": (ops.sqrt, P), "rsqrt": (ops.rsqrt, P),
        "square": (ops.square, X), "negative": (ops.negative, X), "reciprocal": (ops.reciprocal, P),
        "cbrt": (ops.cbrt, P), "erf": (ops.erf, X), "erfinv": (ops.erfinv, U),
        "sigmoid": (ops.sigmoid, X), "softplus": (ops.softplus, X), "softsign": (ops.softsign, X),
        "relu": (ops.relu, X), "relu6": (lambda x: ops.relu6(3 * x), X), "gelu": (ops.gelu, X),
        "silu": (ops.silu, X), "elu": (ops.elu, X), "selu": (ops.selu, X),
        "leaky_relu": (ops.leaky_relu, X), "hard_sigmoid": (ops.hard_sigmoid, X),
        "hard_silu": (ops.hard_silu, X), "log_sigmoid": (ops.log_sigmoid, X),
        "softmax": (ops.softmax, X), "log_softmax": (ops.log_softmax, X),
        "sum": (lambda x: ops.sum(x, axis=1), X), "mean": (ops.mean, X),
        "max": (lambda x: ops.max(x, axis=0), X), "min": (lambda x: ops.min(x, axis=1), X),
        "prod": (lambda x: ops.prod(x, axis=1), X), "var": (lambda x: ops.var(x, axis=1), X),
        "std": (lambda x: ops.std(x, axis=1), X), "logsumexp": (lambda x: ops.logsumexp(x, axis=1), X),
        "cumsum": (lambda x: ops.cumsum(x, axis=1), X), "cumprod": (lambda x: ops.cumprod(x, axis=1), X),
        "norm": (ops.norm, X), "norm_l1": (lambda x: ops.norm(x, ord=1, axis=1), X),
        "sort": (lambda x: ops.sort(x, axis=1), X), "top_k": (lambda x: ops.top_k(x, 2)[0], X),
        "flip": (lambda x: ops.flip(x, axis=1), X), "roll": (lambda x: ops.roll(x, 1, axis=1), X),
        "transpose": (ops.transpose, X), "tril": (ops.tril, A), "triu": (ops.triu, A),
        "trace": (ops.trace, A), "diagonal": (ops.diagonal, A), "outer": (lambda x: ops.outer(x, x), X[0]),
        "clip": (lambda x: ops.clip(x, -1.0, 1.0), X), "where": (lambda x: ops.where(x > 0, x * x, -x), X),
        "take": (lambda x: ops.take(x, np.array([2, 0, 2]), axis=1), X),
        "moments": (lambda x: ops.concatenate(ops.moments(x, axes=[1]), 0), X),
        "normalize": (lambda x: ops.normalize(x, axis=1), X),
        "det": (ops.linalg.det, SPD), "inv": (ops.linalg.inv, SPD), "cholesky": (ops.linalg.cholesky, SPD),
        "slogdet": (lambda x: ops.slogdet(x)[1], SPD), "logdet": (ops.logdet, SPD),
        "solve": (lambda x: ops.linalg.solve(x, B), SPD), "eigh_values": (lambda x: ops.linalg.eigh(x)[0], SPD),
        "svd_values": (lambda x: ops.linalg.svd(x, compute_uv=False), A),
        "qr_r": (lambda x: ops.linalg.qr(x)[1], A), "matmul": (lambda x: ops.matmul(x, B), A),
        "einsum": (lambda x: ops.einsum("ij,jk->ik", x, B), A),
        "conv1d": (lambda x: ops.conv(x, K1, padding="same"), SEQ),
        "conv2d": (lambda x: ops.conv(x, K2, strides=2, padding="valid"), IMG),
        "depthwise_conv": (lambda x: ops.depthwise_conv(x, K2[..., :1], padding="same"), IMG),
        "max_pool": (lambda x: ops.max_pool(x, 2), IMG), "average_pool": (lambda x: ops.average_pool(x, 2), IMG),
        "image.resize": (lambda x: ops.image.resize(x, (9, 9)), IMG),
        "image.resize_bicubic": (lambda x: ops.image.resize(x, (9, 9), interpolation="bicubic"), IMG),
        "image.affine_transform": (
            lambda x: ops.image.affine_transform(x, np.array([[0.9, 0.2, 0.3, -0.1, 1.1, 0.4, 0.0, 0.0]],
                                                             np.float32)), IMG),
        "image.rgb_to_grayscale": (ops.image.rgb_to_grayscale, IMG),
        "image.rgb_to_hsv": (ops.image.rgb_to_hsv, IMG),
        "image.hsv_to_rgb": (ops.image.hsv_to_rgb, IMG),
        "image.gaussian_blur": (ops.image.gaussian_blur, IMG),
        "image.extract_patches": (lambda x: ops.image.extract_patches(x, 2), IMG),
    }
    binary = {
        "add": ops.add, "subtract": ops.subtract, "multiply": ops.multiply, "divide": (ops.divide, "pos"),
        "power": (ops.power, "pos"), "maximum": ops.maximum, "minimum": ops.minimum,
        "arctan2": ops.arctan2, "hypot": ops.hypot, "logaddexp": ops.logaddexp,
        "dot": lambda x, y: ops.dot(x, ops.transpose(y)), "cross": lambda x, y: ops.cross(x[:, :3], y[:, :3]),
        "vdot": ops.vdot, "inner": lambda x, y: ops.inner(x, y), "concatenate": lambda x, y: ops.concatenate([x, y], 1),
        "stack": lambda x, y: ops.stack([x, y]), "squared_difference": lambda x, y: ops.square(x - y),
    }
    cases = {f"ops.{name}": (fn, (x,)) for name, (fn, x) in unary.items()}
    for name, fn in binary.items():
        if isinstance(fn, tuple):
            fn, kind = fn
            cases[f"ops.{name}"] = (fn, (P, _u((3, 4), 0.3, 1.5, 11)))
        else:
            cases[f"ops.{name}"] = (fn, (X, Y))
    return {name: _function_case(fn, inputs) for name, (fn, inputs) in cases.items()}


def _function_case(fn, inputs):
    names = ["x", "y"][: len(inputs)]
    if len(inputs) == 1:
        def f(x):
            return fn(x)
    else:
        def f(x, y):
            return fn(x, y)
    return lambda: (f, dict(zip(names, inputs)))


# --- keras.layers --------------------------------------------------------------

def layer_cases():
    import keras
    from keras import layers as L

    def seq(shape, *made, seed=0, low=-2.0, high=2.0):
        def build():
            keras.utils.set_random_seed(seed)
            model = keras.Sequential([keras.Input(shape), *[m() for m in made]])
            x = _u((2, *shape), low, high, seed + 20)
            return model, {model.inputs[0].name: x}
        return build

    def masked_lstm():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4, 3)), L.Masking(0.0), L.LSTM(4)])
        x = _u((2, 4, 3), seed=21)
        x[0, 3] = 0.0  # the last step of the first sequence is padding
        return model, {model.inputs[0].name: x}

    def float64_data(made, shape):
        """A layer given float64 data (numpy's default dtype), as a model file often does."""
        def build():
            keras.utils.set_random_seed(0)
            return made(), {"x": np.random.default_rng(25).uniform(-1.0, 1.0, (1, *shape))}
        return build

    def functional(kind):
        def build():
            keras.utils.set_random_seed(0)
            a, b = keras.Input((4,)), keras.Input((4,))
            merged = {"Add": L.Add(), "Multiply": L.Multiply(), "Concatenate": L.Concatenate(),
                      "Maximum": L.Maximum(), "Dot": L.Dot(axes=1), "Subtract": L.Subtract()}[kind]([a, b])
            model = keras.Model([a, b], L.Dense(2)(merged))
            return model, {model.inputs[0].name: _u((2, 4), seed=22), model.inputs[1].name: _u((2, 4), seed=23)}
        return build

    def attention():
        keras.utils.set_random_seed(0)
        q = keras.Input((3, 4))
        model = keras.Model(q, L.MultiHeadAttention(2, 2)(q, q))
        return model, {model.inputs[0].name: _u((1, 3, 4), seed=24)}

    cases = {
        "Dense": seq((4,), lambda: L.Dense(3, activation="tanh")),
        "EinsumDense": seq((4,), lambda: L.EinsumDense("ab,bc->ac", output_shape=3, bias_axes="c")),
        "Conv1D": seq((6, 2), lambda: L.Conv1D(3, 3)),
        "Conv2D": seq((5, 5, 2), lambda: L.Conv2D(3, 3, padding="same")),
        "Conv3D": seq((4, 4, 4, 1), lambda: L.Conv3D(2, 2)),
        "Conv2DTranspose": seq((3, 3, 2), lambda: L.Conv2DTranspose(2, 3, strides=2)),
        "Conv1DTranspose": seq((4, 2), lambda: L.Conv1DTranspose(2, 3, strides=2)),
        "SeparableConv2D": seq((5, 5, 2), lambda: L.SeparableConv2D(3, 3)),
        "DepthwiseConv2D": seq((5, 5, 2), lambda: L.DepthwiseConv2D(3)),
        "GroupedConv2D": seq((5, 5, 4), lambda: L.Conv2D(4, 3, groups=2)),
        "MaxPooling1D": seq((6, 2), lambda: L.MaxPooling1D(2)),
        "MaxPooling2D": seq((4, 4, 2), lambda: L.MaxPooling2D(2)),
        "MaxPooling3D": seq((4, 4, 4, 1), lambda: L.MaxPooling3D(2)),
        "AveragePooling1D": seq((6, 2), lambda: L.AveragePooling1D(2)),
        "AveragePooling2D": seq((4, 4, 2), lambda: L.AveragePooling2D(2)),
        "AveragePooling3D": seq((4, 4, 4, 1), lambda: L.AveragePooling3D(2)),
        "GlobalAveragePooling2D": seq((3, 3, 2), lambda: L.GlobalAveragePooling2D()),
        "GlobalMaxPooling2D": seq((3, 3, 2), lambda: L.GlobalMaxPooling2D()),
        "BatchNormalization": seq((4,), lambda: L.BatchNormalization()),
        "LayerNormalization": seq((4,), lambda: L.LayerNormalization()),
        "GroupNormalization": seq((3, 4), lambda: L.GroupNormalization(2)),
        "UnitNormalization": seq((4,), lambda: L.UnitNormalization()),
        "RMSNormalization": seq((4,), lambda: L.RMSNormalization()),
        "SimpleRNN": seq((3, 2), lambda: L.SimpleRNN(3)),
        "GRU": seq((3, 2), lambda: L.GRU(3)),
        "LSTM": seq((3, 2), lambda: L.LSTM(3)),
        "Bidirectional": seq((3, 2), lambda: L.Bidirectional(L.LSTM(2))),
        "ConvLSTM1D": seq((2, 4, 1), lambda: L.ConvLSTM1D(2, 2)),
        "LSTM_masked": masked_lstm,
        "AveragePooling3D_float64_data": float64_data(lambda: L.AveragePooling3D(2), (4, 4, 2, 1)),
        "MaxPooling3D_float64_data": float64_data(lambda: L.MaxPooling3D(2), (4, 4, 2, 1)),
        "Conv3D_float64_data": float64_data(lambda: L.Conv3D(1, 2), (4, 4, 2, 1)),
        "ConvNeXtBlock": _model_file(CONVNEXT_BLOCK),
        "MultiHeadAttention": attention,
        "Attention": seq((3, 4), lambda: _SelfAttention()),
        "Flatten": seq((2, 3), lambda: L.Flatten(), lambda: L.Dense(2)),
        "Permute": seq((2, 3), lambda: L.Permute((2, 1)), lambda: L.Dense(2)),
        "UpSampling2D": seq((2, 2, 1), lambda: L.UpSampling2D(2, interpolation="bilinear")),
        "ZeroPadding2D": seq((2, 2, 1), lambda: L.ZeroPadding2D(1), lambda: L.Conv2D(1, 2)),
        "Cropping2D": seq((4, 4, 1), lambda: L.Cropping2D(1), lambda: L.Dense(2)),
        "Resizing": seq((4, 4, 1), lambda: L.Resizing(6, 6)),
        "Softmax": seq((4,), lambda: L.Dense(4), lambda: L.Softmax()),
        "ReLU": seq((4,), lambda: L.Dense(4), lambda: L.ReLU()),
        "LeakyReLU": seq((4,), lambda: L.Dense(4), lambda: L.LeakyReLU()),
        "PReLU": seq((4,), lambda: L.PReLU(alpha_initializer="random_normal")),
        "ELU": seq((4,), lambda: L.ELU()),
        "Dropout": seq((4,), lambda: L.Dropout(0.5), lambda: L.Dense(2)),
        "GaussianNoise": seq((4,), lambda: L.GaussianNoise(0.1), lambda: L.Dense(2)),
        "Rescaling": seq((4,), lambda: L.Rescaling(0.5, 0.1)),
        "Embedding": _embedding,
        "Add": functional("Add"), "Multiply": functional("Multiply"),
        "Concatenate": functional("Concatenate"), "Maximum": functional("Maximum"),
        "Dot": functional("Dot"), "Subtract": functional("Subtract"),
    }
    return {f"layers.{name}": build for name, build in cases.items()}


#: A model file checked by ``gradcli check`` in its own process, as a user runs it:
#: TensorFlow is then imported by gradcli (without oneDNN), not by Keras first.
CONVNEXT_BLOCK = """\
import keras, numpy as np
keras.utils.set_random_seed(0)
x = keras.Input((6, 6, 4))
y = keras.layers.Conv2D(4, 3, padding="same", groups=4)(x)
y = keras.layers.Dense(6, activation="gelu")(keras.layers.LayerNormalization(epsilon=1e-6)(y))
model = keras.Model(x, keras.layers.GlobalAveragePooling2D()(y))
inputs = {"x": np.random.default_rng(26).uniform(-2.0, 2.0, (1, 6, 6, 4)).astype("float32")}
"""


def _model_file(source, *options):
    """A case run as ``gradcli check FILE --json OPTIONS`` in a new process."""
    return lambda: ("file", source, list(options))


def _SelfAttention():
    import keras

    class SelfAttention(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.inner = keras.layers.Attention()

        def call(self, x):
            return self.inner([x, x])

    return SelfAttention()


def _embedding():
    import keras

    keras.utils.set_random_seed(0)
    ids = keras.Input((3,), dtype="int32")
    model = keras.Model(ids, keras.layers.Dense(2)(keras.layers.Flatten()(keras.layers.Embedding(5, 2)(ids))))
    return model, {model.inputs[0].name: np.array([[0, 3, 3], [4, 1, 0]], np.int32)}


# --- keras.activations -----------------------------------------------------------

def activation_cases():
    import keras

    names = ["celu", "elu", "exponential", "gelu", "glu", "hard_shrink", "hard_sigmoid", "hard_silu",
             "hard_tanh", "leaky_relu", "linear", "log_sigmoid", "log_softmax", "mish", "relu", "relu6",
             "selu", "sigmoid", "silu", "soft_shrink", "softmax", "softplus", "softsign", "sparse_plus",
             "sparse_sigmoid", "sparsemax", "squareplus", "tanh", "tanh_shrink", "threshold"]
    X = _u((3, 4), -3.0, 3.0, 30)
    extra = {"threshold": (0.5, 0.0)}
    cases = {}
    for name in names:
        fn = getattr(keras.activations, name)
        args = extra.get(name, ())
        cases[f"activations.{name}"] = _function_case(lambda x, fn=fn, args=args: fn(x, *args), (X,))
    return cases


# --- keras.losses ------------------------------------------------------------------

def loss_cases():
    import keras

    L = keras.losses
    R = _u((4, 3), -2.0, 2.0, 40)
    prob_true = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
    prob_pred = _u((4, 3), 0.1, 0.9, 41)
    prob_pred /= prob_pred.sum(1, keepdims=True)
    binary_true = (np.arange(12).reshape(4, 3) % 2).astype(np.float32)
    sign_true = 2 * binary_true - 1
    positive = _u((4, 3), 0.2, 2.0, 42)
    cases = {
        "MeanSquaredError": (L.MeanSquaredError(), R, _u((4, 3), seed=43)),
        "MeanAbsoluteError": (L.MeanAbsoluteError(), R, _u((4, 3), seed=43)),
        "MeanAbsolutePercentageError": (L.MeanAbsolutePercentageError(), R, _u((4, 3), 0.5, 2.0, 43)),
        "MeanSquaredLogarithmicError": (L.MeanSquaredLogarithmicError(), positive, _u((4, 3), 0.5, 2.0, 44)),
        "Huber": (L.Huber(), R, _u((4, 3), seed=43)),
        "LogCosh": (L.LogCosh(), R, _u((4, 3), seed=43)),
        "CosineSimilarity": (L.CosineSimilarity(), R, _u((4, 3), seed=43)),
        "Poisson": (L.Poisson(), positive, _u((4, 3), 0.0, 3.0, 45)),
        "KLDivergence": (L.KLDivergence(), prob_pred, prob_true * 0.8 + 0.2 / 3),
        "BinaryCrossentropy": (L.BinaryCrossentropy(), _u((4, 3), 0.1, 0.9, 46), binary_true),
        "BinaryCrossentropy_logits": (L.BinaryCrossentropy(from_logits=True), R, binary_true),
        "BinaryFocalCrossentropy": (L.BinaryFocalCrossentropy(from_logits=True), R, binary_true),
        "CategoricalCrossentropy": (L.CategoricalCrossentropy(), prob_pred, prob_true),
        "CategoricalCrossentropy_logits": (L.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
                                           R, prob_true),
        "CategoricalFocalCrossentropy": (L.CategoricalFocalCrossentropy(from_logits=True), R, prob_true),
        "CategoricalGeneralizedCrossEntropy": (L.CategoricalGeneralizedCrossEntropy(), prob_pred,
                                               np.array([0, 2, 1, 1], np.int32)),
        "SparseCategoricalCrossentropy": (L.SparseCategoricalCrossentropy(from_logits=True), R,
                                          np.array([0, 2, 1, 1], np.int32)),
        "Hinge": (L.Hinge(), R, sign_true),
        "SquaredHinge": (L.SquaredHinge(), R, sign_true),
        "CategoricalHinge": (L.CategoricalHinge(), R, prob_true),
        "Dice": (L.Dice(), _u((4, 3), 0.1, 0.9, 47), binary_true),
        "Tversky": (L.Tversky(), _u((4, 3), 0.1, 0.9, 47), binary_true),
        "Circle": (L.Circle(), R, np.array([0, 1, 0, 1], np.int32)),
    }
    out = {}
    for name, (loss, y_pred, y_true) in cases.items():
        out[f"losses.{name}"] = _function_case(lambda y_pred, loss=loss, y_true=y_true: loss(y_true, y_pred),
                                               (y_pred,))
    return out


# --- keras.applications ------------------------------------------------------------

#: Network -> the smallest input size it accepts (``weights=None``), and options.
#: ConvNeXtTiny's 27.8M weights: the joint check of the layer pass along 3 probes
#: needs about 7.1 GB in float64, over the memory guard's half of this machine's
#: 13.8 GB (exit 2, which says so); it is checked with respect to its image.
APPLICATIONS = {
    "MobileNetV3Small": (32, ()),
    "EfficientNetB0": (32, ()),
    "ConvNeXtTiny": (32, ("--wrt", "x")),
    "Xception": (71, ()),
    "InceptionV3": (75, ()),
    # Issue 35: relu kinks inside the step on its whole-model joint row.
    "NASNetMobile": (32, ()),
}


def application_cases():
    def build(name, size, options):
        # These networks scale their own input (0..255); the others take -1..1.
        low, high = (0.0, 255.0) if name.startswith(("Efficient", "MobileNetV3", "ConvNeXt")) else (-1.0, 1.0)
        source = (
            "import keras, numpy as np\n"
            "keras.utils.set_random_seed(0)\n"
            f"model = keras.applications.{name}(weights=None, input_shape=({size}, {size}, 3), classes=10)\n"
            f"inputs = {{'x': np.random.default_rng(50).uniform({low}, {high}, (1, {size}, {size}, 3))"
            ".astype('float32')}\n"
        )
        return _model_file(source, *options)

    return {f"applications.{name}": build(name, size, options) for name, (size, options) in APPLICATIONS.items()}


GROUPS = {"ops": op_cases, "layers": layer_cases, "activations": activation_cases, "losses": loss_cases,
          "apps": application_cases}


# --- running -------------------------------------------------------------------------

def run_case(name, build):
    import gradcli
    from gradcli.render.text import model_verdict

    started = time.perf_counter()
    try:
        made = build()
        if made[0] == "file":
            return _run_file(name, *made[1:], started)
        model, inputs = made
        result = gradcli.check(model, inputs)
        (row,) = result.models
        verdict = model_verdict(row)
        detail = row.error or ""
        if not detail:
            failing = [p for p in row.pairs if p.failed]
            detail = "; ".join(f"{p.output}/{p.input}: {p.verdict} {p.explanation}"[:300] for p in failing[:2])
            if getattr(row, "layers", None):
                detail += " " + "; ".join(
                    f"{layer.name}: {layer.verdict}" for layer in row.layers if getattr(layer, "failed", False)
                )[:300]
        code = result.exit_code
    except Exception as exc:  # a crash of gradcli itself: always a false alarm
        verdict, code, detail = "crash", -1, "".join(traceback.format_exception_only(exc)).strip()[:400]
    return {"case": name, "exit": code, "verdict": verdict, "detail": detail.strip(),
            "real_bug": REAL_BUGS.get(name.replace("ops.", "ops.", 1)),
            "seconds": round(time.perf_counter() - started, 2)}


def _run_file(name, source, options, started):
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, name.split(".")[-1].lower() + ".py")
        with open(path, "w") as f:
            f.write(source)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        done = subprocess.run([sys.executable, "-m", "gradcli", "check", path, "--json", *options],
                              capture_output=True, text=True, env=env)
    try:
        (model,) = json.loads(done.stdout)["result"]["models"]
    except (ValueError, KeyError, TypeError):
        model = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1], "pairs": [], "layers": []}
    failing = [p for p in model.get("pairs", []) if p.get("failed")]
    layers = [r for r in model.get("layers", []) if r.get("failed")]
    detail = model.get("error") or "; ".join(
        [f"{p['output']}/{p['input']}: {p['verdict']} {p['explanation']}"[:300] for p in failing[:2]]
        + [f"{r['path']}: {r['verdict']}" for r in layers[:3]]
    )
    verdict = "error" if model.get("error") else ("pass" if done.returncode == 0 else
                                                   "fail" + (" (layer by layer)" if layers else ""))
    return {"case": name, "exit": done.returncode, "verdict": verdict, "detail": (detail or "").strip(),
            "options": options, "real_bug": REAL_BUGS.get(name),
            "seconds": round(time.perf_counter() - started, 2)}


def evidence():
    """Independent truth for ``REAL_BUGS`` (no finite differences, no gradcli).

    * ``affine_transform``: the map is linear in the image, so its exact Jacobian's
      column i is the transform of the i-th unit image (forward passes only).
      Reverse mode's Jacobian (``tf.GradientTape``) is compared with it.
    * ``hsv_to_rgb``: ``tf.gradients`` of HSVToRGB gives None, though the map is
      smooth almost everywhere.
    * ``cholesky``: f(A + t E_ij) for an upper element (i < j) equals f(A) to the
      last bit (the kernel reads the lower triangle), so df/dA_ij = 0; the tape's
      gradient of sum(cholesky(A) * W) there is not.
    * ``resize`` (bilinear): linear in the image, so J t = resize(t) exactly;
      ``ForwardAccumulator`` returns None for it.
    """
    import tensorflow as tf
    from keras import ops

    found = {}
    image = tf.constant(_u((1, 6, 6, 3), 0.0, 1.0, 7), tf.float32)
    transform = np.array([[0.9, 0.2, 0.3, -0.1, 1.1, 0.4, 0.0, 0.0]], np.float32)

    def f(x):
        return ops.image.affine_transform(x, transform)

    n = int(np.prod(image.shape))
    units = np.eye(n, dtype=np.float32).reshape(n, *image.shape[1:])
    exact = np.stack([np.asarray(f(u[None])).ravel() for u in units], 1)  # [outputs, inputs]
    with tf.GradientTape() as tape:
        tape.watch(image)
        out = tf.reshape(f(image), [-1])
    reverse = tape.jacobian(out, image).numpy().reshape(out.shape[0], n)
    found["affine_transform"] = {
        "max |reverse - exact|": float(np.max(np.abs(reverse - exact))),
        "max |exact|": float(np.max(np.abs(exact))),
        "wrong elements": int(np.sum(np.abs(reverse - exact) > 1e-5)),
        "of": int(exact.size),
    }
    hsv = tf.constant(_u((1, 2, 2, 3), 0.1, 0.9, 7))
    with tf.GradientTape() as tape:
        tape.watch(hsv)
        rgb = tf.reduce_sum(tf.image.hsv_to_rgb(hsv))
    found["hsv_to_rgb"] = {"tape gradient": repr(tape.gradient(rgb, hsv)),
                           "output changes": float(tf.reduce_sum(tf.image.hsv_to_rgb(hsv + 0.01))) != float(rgb)}
    a = _u((4, 4), -1.0, 1.0, 5).astype(np.float64)
    spd = a @ a.T + 4 * np.eye(4)
    weights = np.random.default_rng(9).normal(size=(4, 4))
    base = np.asarray(ops.cholesky(spd))
    upper = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    unchanged = all(np.array_equal(np.asarray(ops.cholesky(spd + 0.25 * np.eye(4)[:, [i]] @ np.eye(4)[[j]])), base)
                    for i, j in upper)
    x = tf.constant(spd)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = tf.reduce_sum(tf.linalg.cholesky(x) * weights)
    gradient = tape.gradient(value, x).numpy()
    found["cholesky"] = {"f unchanged by every upper element (+0.25)": unchanged,
                         "max |gradient| over upper elements": float(max(abs(gradient[i, j]) for i, j in upper))}
    img = tf.constant(np.random.default_rng(1).uniform(0, 1, (1, 4, 4, 1)))
    tangent = tf.constant(np.random.default_rng(2).normal(size=(1, 4, 4, 1)))
    with tf.autodiff.ForwardAccumulator(img, tangent) as acc:
        resized = tf.image.resize(img, (6, 6))
    found["resize_bilinear"] = {"ForwardAccumulator jvp": repr(acc.jvp(resized)),
                                "max |J t| (exact: resize(t))": float(tf.reduce_max(tf.abs(tf.image.resize(tangent, (6, 6)))))}
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="ops,layers,activations,losses,apps")
    parser.add_argument("--only", nargs="*", default=None, help="case names (or prefixes) to run")
    parser.add_argument("--label", default="", help="a word saved with the results (before, after)")
    args = parser.parse_args(argv)
    from results_io import machine, write_results  # bench/ is on sys.path

    started_machine = machine()
    rows = []
    for group in args.groups.split(","):
        for name, build in GROUPS[group]().items():
            if args.only and not any(name == o or name.startswith(o) for o in args.only):
                continue
            row = run_case(name, build)
            row["group"] = group
            rows.append(row)
            print(f"{row['exit']:>2} {row['seconds']:7.1f}s {name}: {row['verdict']} {row['detail'][:200]}",
                  file=sys.stderr, flush=True)
    truth = evidence() if any(r["real_bug"] for r in rows) else {}
    failures = [r for r in rows if r["exit"] != 0]
    false_alarms = [r for r in failures if not r["real_bug"]]
    real = [r for r in failures if r["real_bug"]]
    missed = [r for r in rows if r["real_bug"] and r["exit"] == 0]
    summary = {"cases": len(rows), "passes": len(rows) - len(failures), "false_alarms": len(false_alarms),
               "real_bugs_found": len(real), "real_bugs_missed": len(missed)}
    path = write_results("keras_sweep", {"label": args.label, "machine": started_machine, "summary": summary,
                                         "evidence": truth, "rows": rows})
    print("| group | cases | pass | false alarms | real bugs found |\n|---|---|---|---|---|")
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == group]
        print(f"| {group} | {len(mine)} | {sum(r['exit'] == 0 for r in mine)} "
              f"| {sum(r['exit'] != 0 and not r['real_bug'] for r in mine)} "
              f"| {sum(r['exit'] != 0 and bool(r['real_bug']) for r in mine)} |")
    print(f"| all | {summary['cases']} | {summary['passes']} | {summary['false_alarms']} "
          f"| {summary['real_bugs_found']} |")
    if failures:
        print("\n| case | exit | verdict | real bug / detail |\n|---|---|---|---|")
        for r in failures:
            said = r["real_bug"] or ("FALSE ALARM: " + r["detail"][:160])
            print(f"| {r['case']} | {r['exit']} | {r['verdict']} | {said.replace('|', '/')} |")
    for name, found in truth.items():
        print(f"\nevidence {name}: {found}")
    print(f"\nsaved {os.path.relpath(path)}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(HERE))
    main()
