"""A custom lookup gradient returned as IndexedSlices, 1.5x too large."""
from _gradient_forms import gather_model

model, inputs = gather_model(scale=1.5)
