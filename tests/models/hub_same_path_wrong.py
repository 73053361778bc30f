"""Two distinct weights at one variable path, the second's gradient twice the
right one (_same_path.py): gradcli fails twice/scale/w-1 only."""
from _same_path import same_path_model

model, inputs = same_path_model(factor=2.0)
