"""A task module that takes seconds to import, as TensorFlow does in a new worker
(tests/test_isolation.py): ``--timeout`` counts the task's run, not the import."""
import time

IMPORT_SECONDS = 2.0
time.sleep(IMPORT_SECONDS)


def quick(seconds: float):
    time.sleep(seconds)
    return seconds
