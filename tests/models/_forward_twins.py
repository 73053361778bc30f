"""Twin fixtures of forward mode taken eagerly and inside a tf.function.

``softplus_model(recorded)``: a plain Python model (it runs eagerly) calling a
``tf.custom_gradient`` softplus s(x) = log(1 + e^x) whose rule dy * sigmoid(x)
is right, loss = sum s(x)^2, so d loss / dx = 2 s(x) sigmoid(x). The wrong twin
(``recorded=False``) computes the forward value inside ``tf.stop_gradient``,
as a custom op whose forward pass need not be recorded: TensorFlow's forward
mode run eagerly finds no tangent on the result and transposes the rule
(right), while an accumulator inside a traced function differentiates the
forward ops and gives exactly 0 (a compiled JVP or HVP is wrong). Reverse mode
runs the rule both ways and is right in both twins. ``eager_only`` reads a
value with ``.numpy()``, so the model cannot be traced at all.
"""

import tensorflow as tf


def softplus_model(recorded: bool, eager_only: bool = False):
    @tf.custom_gradient
    def softplus(x):
        y = tf.math.log1p(tf.exp(x))

        def grad(upstream):
            return upstream * tf.sigmoid(x)

        return (y if recorded else tf.stop_gradient(y)), grad

    def model(x):
        if eager_only:
            x = x + 0.0 * float(x.numpy()[0])  # a Python float taken from the value
        return tf.reduce_sum(softplus(x) ** 2)

    return model, {"x": [-1.5, 0.25, 2.0]}
