"""Log-densities with a covariance-like matrix as the input, through TensorFlow
Probability: a multivariate normal's with its covariance (``cov``), and a
Wishart's at a sample (``x``). Both take TensorFlow's Cholesky of a symmetric
matrix, whose gradient is the symmetric one."""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
DATA = np.random.default_rng(11).standard_normal((4, 3))


def model(cov, x):
    normal = tfd.MultivariateNormalFullCovariance(loc=tf.zeros(3, cov.dtype), covariance_matrix=cov)
    wishart = tfd.WishartTriL(df=tf.constant(5.0, x.dtype), scale_tril=tf.eye(3, dtype=x.dtype))
    return {"normal": tf.reduce_sum(normal.log_prob(tf.constant(DATA, cov.dtype))), "wishart": wishart.log_prob(x)}


def inputs(rng):
    m, n = rng.standard_normal((2, 3, 3))
    return {"cov": m @ m.T + 3.0 * np.eye(3), "x": n @ n.T + 2.0 * np.eye(3)}
