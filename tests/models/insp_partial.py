"""u = 2a reaches only a, v = 3b only b: two of the four Jacobian blocks are disconnected (None)."""


def model(a, b):
    return {"u": 2.0 * a, "v": 3.0 * b}


inputs = {"a": [1.0, 2.0], "b": [0.5]}
