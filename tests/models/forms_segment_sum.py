"""keras.ops.segment_sum, whose JVP TensorFlow returns as IndexedSlices (closed form in _gradient_forms)."""
from _gradient_forms import segment_model

model, inputs = segment_model()
