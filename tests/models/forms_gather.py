"""tf.gather's IndexedSlices gradient (closed form in _gradient_forms)."""
from _gradient_forms import gather_model

model, inputs = gather_model()
