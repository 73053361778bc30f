"""Correct (y = x * x), but starts a thread that ends the process (exit code
0) 1 s after the model is imported."""
import os
import threading
import time


def _end_later():
    time.sleep(1.0)
    os._exit(0)


threading.Thread(target=_end_later, daemon=True).start()

inputs = {"x": [1.0, 2.0]}


def model(x):
    return x * x
