"""A plain Python model whose custom softplus computes its value inside
tf.stop_gradient (its rule is right): forward mode is right eagerly and 0
inside a tf.function (``_forward_twins``)."""

from _forward_twins import softplus_model

model, inputs = softplus_model(recorded=False)
