"""The first folder's helpers: f(x) = x**2 with its true gradient."""
import tensorflow as tf


def f(x):
    return x * x
