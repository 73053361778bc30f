"""fwd_traced_only_wrong.py's model reading a value with .numpy(): it runs
eagerly only, so its JVP cannot be taken inside a tf.function
(``_forward_twins``)."""

from _forward_twins import softplus_model

model, inputs = softplus_model(recorded=False, eager_only=True)
