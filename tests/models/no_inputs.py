def model(x):
    return x * 2.0
