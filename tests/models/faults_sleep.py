"""Sleeps for a minute while imported, after touching the file named by
GRADCLI_TEST_STARTED (if set): interrupt tests signal once the batch is here."""
import os
import time

if os.environ.get("GRADCLI_TEST_STARTED"):
    open(os.environ["GRADCLI_TEST_STARTED"], "w").close()
time.sleep(60)

inputs = {"x": [1.0, 2.0]}


def model(x):
    return x * x
