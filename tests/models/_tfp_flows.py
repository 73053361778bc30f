"""TensorFlow Probability bijectors as model files for ``gradcli logdet``,
``jacobian`` and ``check`` (``tests/test_real_libraries_tfp.py``), one factory.

Every bijector here caches ``forward(x)`` by the input tensor object, as TFP's
bijectors do: the files are written the plain way (``b.forward(x)``, no
``tf.identity``), so a command that differentiates a call on tensors an
earlier call saw finds no path (``numerics.autodiff.fresh``).

* ``sigmoid``, ``softplus``: elementwise; the test holds their closed forms.
* ``chain``: Shift(0.3) o Sigmoid o Scale(2).
* ``scale_tril``: ScaleMatvecTriL, a constant Jacobian whose log-det TFP
  returns as a scalar for the whole batch.
* ``realnvp``: RealNVP on R^4, two dimensions masked, a small fixed
  shift-and-log-scale function of the masked half.
* ``maf``: MaskedAutoregressiveFlow on R^3, shift and log-scale functions of
  the exclusive cumulative sum (autoregressive by construction).
* ``wrong_log_det``: y = sinh(x) elementwise, a subclass of ``tfb.Bijector``
  whose ``_forward_log_det_jacobian`` is log(1 + sinh(x)^2) = 2 log cosh(x)
  (the square root of 1 + sinh^2 forgotten): twice the true log cosh(x).

As models themselves (``model = the bijector``, ``bijector_file``; gradcli
checks forward and inverse, ``gradcli.model.bijector``):

* ``sigmoid``, ``realnvp``: TFP's, right.
* ``cholesky_outer``: CholeskyOuterProduct, L -> L L^T on 2 x 2 lower
  triangular matrices: its log-dets exist from event rank 2 (TFP raises at 1);
  forward log-det n log 2 + sum_i (n - i + 1) log L_ii.
* ``scale_matvec_lu``: ScaleMatvecLU(LU, permutation [0, 1, 2]), y = L U x
  (L the unit lower triangle of LU, U its upper triangle), log-det sum_i
  log |U_ii|: TFP keeps it in float32 (it takes no float64 x), so it is
  checked in float32.
* ``correlation_cholesky``: CorrelationCholesky, R^3 -> 3 x 3 Cholesky factors
  of correlation matrices: its inverse log-det exists from event rank 2.
* ``wrong_inverse``: y = 2x + 1 elementwise whose ``_inverse`` is (y + 1) / 2
  (the sign of the shift wrong): inverse(forward(x)) = x + 1, its Jacobian
  and both log-dets (3 log 2 and -3 log 2 per example of R^3) right.
* ``wrong_inverse_log_det``: y = sinh(x), inverse asinh(y), whose
  ``_inverse_log_det_jacobian`` is +log cosh(asinh(y)) (the sign wrong; the
  truth is -log sqrt(1 + y^2)).

The test computes its truth itself (closed forms, or central differences of
``forward`` in float64), never from gradcli.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfb = tfp.bijectors

SCALE_TRIL = np.array([[1.5, 0.0, 0.0], [0.3, -0.7, 0.0], [0.2, 0.4, 2.0]])
LOWER_UPPER = np.array([[2.0, 0.3, 0.1], [0.4, 1.5, -0.2], [0.1, 0.5, 0.9]])
NVP_A = np.array([[0.8, -0.4], [0.3, 0.6]])
NVP_B = np.array([[-0.5, 0.2], [0.7, 0.1]])


def _nvp_shift_and_log_scale(x0, output_units):
    return tf.tanh(x0 @ tf.constant(NVP_A, x0.dtype)), 0.5 * tf.sin(x0 @ tf.constant(NVP_B, x0.dtype))


def _maf_shift_and_log_scale(x):
    h = tf.math.cumsum(x, axis=-1, exclusive=True)  # element i sees x[:i] only
    return 0.3 * tf.tanh(h), 0.4 * tf.sin(h)


class WrongLogDet(tfb.Bijector):
    """y = sinh(x); the log-det is 2 log cosh(x), twice the truth (module docstring)."""

    def __init__(self):
        super().__init__(forward_min_event_ndims=0, name="wrong_log_det")

    def _forward(self, x):
        return tf.sinh(x)

    def _inverse(self, y):
        return tf.asinh(y)

    def _forward_log_det_jacobian(self, x):
        return tf.math.log1p(tf.sinh(x) ** 2)  # wrong: log cosh(x) = 0.5 log(1 + sinh(x)^2)


class WrongInverse(tfb.Bijector):
    """y = 2x + 1, inverse (y + 1) / 2: wrong (module docstring)."""

    def __init__(self):
        super().__init__(forward_min_event_ndims=0, name="wrong_inverse")

    def _forward(self, x):
        return 2.0 * x + 1.0

    def _inverse(self, y):
        return (y + 1.0) / 2.0  # wrong: (y - 1) / 2

    def _forward_log_det_jacobian(self, x):
        return tf.fill(tf.shape(x), tf.math.log(tf.constant(2.0, x.dtype)))

    def _inverse_log_det_jacobian(self, y):
        return tf.fill(tf.shape(y), -tf.math.log(tf.constant(2.0, y.dtype)))


class WrongInverseLogDet(tfb.Bijector):
    """y = sinh(x); the inverse's log-det has the wrong sign (module docstring)."""

    def __init__(self):
        super().__init__(forward_min_event_ndims=0, name="wrong_inverse_log_det")

    def _forward(self, x):
        return tf.sinh(x)

    def _inverse(self, y):
        return tf.asinh(y)

    def _forward_log_det_jacobian(self, x):
        return tf.math.log(tf.cosh(x))

    def _inverse_log_det_jacobian(self, y):
        return tf.math.log(tf.cosh(tf.asinh(y)))  # wrong: -log cosh(asinh(y))


def bijector_file(name: str):
    """``model`` (the bijector itself) and ``inputs`` of a model file for ``name``."""
    b = {"wrong_inverse": WrongInverse, "wrong_inverse_log_det": WrongInverseLogDet}.get(name)
    b = bijector(name) if b is None else b()

    def inputs(rng):
        if name in POINTS:
            return {"x": POINTS[name]}
        return {"x": rng.standard_normal(SHAPES.get(name, (4, 3)))}

    return b, inputs


def bijector(name: str):
    return {
        "sigmoid": tfb.Sigmoid,
        "softplus": tfb.Softplus,
        "chain": lambda: tfb.Chain([tfb.Shift(np.float64(0.3)), tfb.Sigmoid(), tfb.Scale(np.float64(2.0))]),
        "scale_tril": lambda: tfb.ScaleMatvecTriL(scale_tril=SCALE_TRIL),
        "realnvp": lambda: tfb.RealNVP(num_masked=2, shift_and_log_scale_fn=_nvp_shift_and_log_scale),
        "maf": lambda: tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=_maf_shift_and_log_scale),
        "wrong_log_det": WrongLogDet,
        "cholesky_outer": tfb.CholeskyOuterProduct,
        "scale_matvec_lu": lambda: tfb.ScaleMatvecLU(lower_upper=LOWER_UPPER, permutation=[0, 1, 2]),
        "correlation_cholesky": tfb.CorrelationCholesky,
    }[name]()


#: Examples x event size of each flow's input.
SHAPES = {"realnvp": (4, 4), "maf": (4, 3), "correlation_cholesky": (2, 3)}
#: Inputs that must lie in the bijector's domain: two lower triangular 2 x 2
#: matrices with positive diagonals.
POINTS = {"cholesky_outer": np.array([[[1.5, 0.0], [0.3, 0.8]], [[0.9, 0.0], [-0.4, 1.2]]])}


def flow_file(name: str):
    """``model``, ``log_det_jacobian`` and ``inputs`` of a model file for ``name``."""
    b = bijector(name)

    def model(x):
        return b.forward(x)

    def log_det_jacobian(x):
        return b.forward_log_det_jacobian(x, event_ndims=1)

    def inputs(rng):
        return {"x": rng.standard_normal(SHAPES.get(name, (4, 3)))}

    return model, log_det_jacobian, inputs
