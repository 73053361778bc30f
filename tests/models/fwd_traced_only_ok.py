"""The right twin of fwd_traced_only_wrong.py: the custom softplus's value is
recorded, so forward mode is right eagerly and inside a tf.function
(``_forward_twins``)."""

from _forward_twins import softplus_model

model, inputs = softplus_model(recorded=True)
