"""A model file whose `check` dict names an option that does not exist (exit 2)."""


def model(x):
    return x * x


inputs = {"x": [1.0]}
check = {"rtoll": 1e-4}
