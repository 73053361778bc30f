"""A tf.custom_gradient with a captured variable whose variable gradient is 2x off."""
from _gradient_forms import variable_model

layer, model, inputs = variable_model(scale=2.0)
