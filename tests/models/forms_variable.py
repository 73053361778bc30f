"""A tf.custom_gradient with a captured variable (grad(dy, variables=None)), right."""
from _gradient_forms import variable_model

layer, model, inputs = variable_model()
