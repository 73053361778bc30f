"""Correct (y = x * x), but starts processes that outlive it: a plain
subprocess, one in a session of its own, a forked child and a multiprocessing
process. Their ids are appended to the file named by GRADCLI_ISO_PIDS."""
import multiprocessing
import os
import subprocess
import time

_pids = [
    subprocess.Popen(["sleep", "300"]).pid,
    subprocess.Popen(["sleep", "300"], start_new_session=True).pid,
]
_child = os.fork()
if _child == 0:
    time.sleep(300)
    os._exit(0)
_pids.append(_child)
_process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(300,))
_process.start()
_pids.append(_process.pid)
with open(os.environ["GRADCLI_ISO_PIDS"], "a") as _out:
    _out.write("".join(f"{pid}\n" for pid in _pids))

inputs = {"x": [1.0, 2.0]}


def model(x):
    return x * x
