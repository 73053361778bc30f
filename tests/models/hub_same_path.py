"""Two distinct weights at one variable path, right (_same_path.py)."""
from _same_path import same_path_model

model, inputs = same_path_model(factor=1.0)
