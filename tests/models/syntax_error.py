import tensorflow as tf

def model(x)
    return x
