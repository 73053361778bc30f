def net(x):
    return x

inputs = {"x": [1.0]}
