"""Twin fixtures of a float64 model that computes a real FFT in complex64
(right and wrong differ only by the factor a custom gradient is off by).

``make_model(factor)``: ``mix`` takes the float64 input x (8 values) straight
to complex64 (one cast, no float32 step between), takes its FFT and returns the
real part as float64: mix(x) = C x with C[k, n] = cos(2 pi k n / 8), symmetric.
Its ``tf.custom_gradient`` computes C^T dy by the same FFT, in complex64 too,
scaled by ``factor`` (right: 1). The model is y = sin(mix(x)) + x / 4, so

    dy_k / dx_n = cos((C x)_k) C[k, n] + (k == n) / 4.

Every value a gradient flows through is rounded to float32 by the complex64
FFT: the check runs at float32 rules. ``prec_complex_fft.py`` is right,
``prec_complex_fft_wrong.py`` is off by 2% (20 times float32's rtol of 1e-3).
"""

import numpy as np
import tensorflow as tf

N = 8
X = np.linspace(-1.0, 1.2, N) * np.array([1.0, -0.5, 0.8, 1.3, -1.1, 0.4, 0.9, -0.7])


def real_fft(v):
    """Re(FFT(v)) of a float64 vector, computed in complex64."""
    spectrum = tf.signal.fft(tf.cast(v, tf.complex64))
    return tf.cast(tf.math.real(spectrum), tf.float64)


def make_model(factor):
    @tf.custom_gradient
    def mix(x):
        def grad(upstream):
            return factor * real_fft(upstream)

        return real_fft(x), grad

    def model(x):
        return tf.sin(mix(x)) + x / 4.0

    return model


def jacobian(x):
    """The exact Jacobian in float64 (numpy, no TensorFlow): [output, input]."""
    n = np.arange(N)
    c = np.cos(2.0 * np.pi * np.outer(n, n) / N)
    return np.cos(c @ x)[:, None] * c + np.eye(N) / 4.0
