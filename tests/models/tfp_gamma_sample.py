"""A seeded Gamma draw (issue 35, item 11): TensorFlow Probability's sampler
draws other values under a GradientTape than without one (its implementation
is picked by whether a gradient is recorded), and its gradient is the implicit
reparameterization gradient of the distribution, not the derivative of the
seeded draw."""

import tensorflow_probability as tfp

tfd = tfp.distributions


def model(alpha):
    return tfd.Gamma(concentration=alpha, rate=1.0).sample(seed=(1, 2))


inputs = {"alpha": [0.7, 1.5, 3.0]}
