"""keras.ops.scatter with repeated rows (closed form in _gradient_forms)."""
from _gradient_forms import scatter_model

model, inputs = scatter_model()
