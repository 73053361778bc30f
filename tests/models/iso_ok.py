"""A correct model (y = x * x, Jacobian diag(2x)) that needs the process as a
fresh interpreter has it: it reads its point from iso_point.json in the working
directory, computes log(0) (-inf and a warning unless numpy was told to raise),
warns, finds GRADCLI_ISO_MARK unset and SIGUSR1 at its default handler, and
takes 1.5 s to import (an alarm due within that time would end it). Each entry
is the same model, named after the model checked before it in the tests."""
import json
import os
import signal
import time
import warnings

import numpy as np

with open("iso_point.json") as _point:
    inputs = {"x": json.load(_point)}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    assert np.log(np.float64(0.0)) == -np.inf
warnings.warn("iso_ok.py is imported", UserWarning)
assert "GRADCLI_ISO_MARK" not in os.environ
assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
time.sleep(1.5)


def model(x):
    return x * x


after_alarm = after_state = after_thread = after_spawn = model
