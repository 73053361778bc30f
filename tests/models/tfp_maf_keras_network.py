"""A masked autoregressive flow (tensorflow_probability) whose network weights
live in a tf_keras model inside the bijector (``AutoregressiveNetwork``), and
whose log-density the file evaluates through a ``tf.function`` of its own: that
function's trace reads the network's variables, so gradcli cannot vary them.
The check asks for x and y only (``wrt``), so the weights are left as they are
and the check goes on (exit 0); asking for a weight is refused (exit 3)."""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfb, tfd = tfp.bijectors, tfp.distributions

network = tfb.AutoregressiveNetwork(params=2, hidden_units=[4], activation="tanh", dtype=tf.float64)
flow = tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=network)
density = tfd.TransformedDistribution(tfd.Sample(tfd.Normal(tf.constant(0.0, tf.float64), 1.0), [2]), flow)


@tf.function
def log_prob(z):
    return density.log_prob(z)


log_prob(tf.zeros([1, 2], tf.float64))  # builds the network


def model(x, y):
    return log_prob(tf.stack([x, y], axis=-1))


inputs = {"x": np.array([0.3, -0.2]), "y": np.array([0.5, 0.1])}
wrt = ["x", "y"]
