"""A covariance's log-posterior through TensorFlow Probability, as a MAP fit
writes it: a multivariate normal's log-likelihood of the data, a Wishart
log-prior of the covariance, and a trace penalty. Correct. S reaches two
Choleskys (the likelihood's, the Wishart's) and the output around them (the
trace): compared element by element, with each Cholesky's part as the op
reads its matrix (docs/verdict-rules.md, the symmetric rule)."""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
DATA = np.random.default_rng(5).standard_normal((6, 3))
PENALTY = 0.1


def model(S):
    likelihood = tfd.MultivariateNormalTriL(loc=tf.zeros(3, S.dtype), scale_tril=tf.linalg.cholesky(S))
    prior = tfd.WishartTriL(df=tf.constant(5.0, S.dtype), scale_tril=tf.eye(3, dtype=S.dtype))
    log_likelihood = tf.reduce_sum(likelihood.log_prob(tf.constant(DATA, S.dtype)))
    return log_likelihood + prior.log_prob(S) - PENALTY * tf.linalg.trace(S)


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"S": m @ m.T + 3.0 * np.eye(3)}
