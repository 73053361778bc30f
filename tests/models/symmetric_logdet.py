"""logdet(A) of a raw 3x3 covariance: TensorFlow takes it through the Cholesky
factor, so its gradient and Hessian are TensorFlow's symmetric ones. Along
symmetric directions S: d logdet = tr(A^-1 S), d2 logdet = -tr(A^-1 S A^-1 S)."""
import numpy as np
import tensorflow as tf

def model(A):
    return tf.linalg.logdet(A)

def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"A": m @ m.T + 3 * np.eye(3)}
