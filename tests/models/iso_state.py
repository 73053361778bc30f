"""Correct (y = x * x), but changes its process for whatever runs next: the
working directory, numpy's error handling, the warnings filters, an
environment variable and the SIGUSR1 handler."""
import os
import signal
import tempfile
import warnings

import numpy as np

os.chdir(tempfile.gettempdir())
np.seterr(all="raise")
warnings.simplefilter("error")
os.environ["GRADCLI_ISO_MARK"] = "set by iso_state.py"
signal.signal(signal.SIGUSR1, lambda *_: os._exit(9))

inputs = {"x": [1.0, 2.0]}


def model(x):
    return x * x
