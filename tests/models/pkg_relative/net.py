"""A model file inside a package that imports its neighbour relatively:
y = 2 tanh(x), so dy/dx = 2 (1 - tanh(x)^2)."""
from ._layers import softclip

inputs = {"x": [0.5, -1.0]}


def model(x):
    return softclip(x)
