"""Tasks for supervised workers that import no TensorFlow (tests/test_isolation.py
runs them through gradcli.workers.batch.supervise): each does to its worker
what a model file could."""
import os
import subprocess
import sys
import threading
import time


def spawn(pids_file: str, hang: bool = False):
    """Start a subprocess, one in its own session and a forked child, all
    sleeping; write their ids to ``pids_file``; then return, or hang."""
    pids = [
        subprocess.Popen(["sleep", "300"]).pid,
        subprocess.Popen(["sleep", "300"], start_new_session=True).pid,
    ]
    child = os.fork()
    if child == 0:
        time.sleep(300)
        os._exit(0)
    pids.append(child)
    with open(pids_file, "a") as out:
        out.write("".join(f"{pid}\n" for pid in pids))
    while hang:
        time.sleep(1)
    return pids


def exit_later(seconds: float):
    """Leave a thread that ends the process (exit code 0) after ``seconds``."""
    def end():
        time.sleep(seconds)
        os._exit(0)

    threading.Thread(target=end, daemon=True).start()
    return "started"


def wait(seconds: float):
    time.sleep(seconds)
    return seconds


def alarm():
    import signal

    signal.alarm(1)
    return "alarm"


def change_state(folder: str):
    import signal
    import warnings

    import numpy as np

    os.chdir(folder)
    np.seterr(all="raise")
    warnings.simplefilter("error")
    os.environ["GRADCLI_ISO_MARK"] = "1"
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    np.sum = None
    sys.path.insert(0, folder)
    sys.modules["json"] = None
    import faulthandler
    import resource

    faulthandler.dump_traceback_later(1.0, exit=True)  # would end the process 1 s later
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    # SIGXCPU, which ends the process, after one more second of CPU time
    resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime) + 1, hard))
    return "changed"


def state():
    """What the next model would find."""
    import signal
    import warnings

    import numpy as np

    return {
        "cwd": os.getcwd(), "numpy": np.geterr(), "filters": len(warnings.filters),
        "mark": os.environ.get("GRADCLI_ISO_MARK"), "usr1": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
        "sum": np.sum is not None, "pid": os.getpid(), "path": list(sys.path),
        "json": sys.modules.get("json", "absent") is not None,  # importable: not blocked by a None entry "cpu_limit": _cpu_limit(),
    }


def _cpu_limit():
    import resource

    return resource.getrlimit(resource.RLIMIT_CPU)


def spin(seconds: float):
    """Use ``seconds`` of CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds


def fail():
    raise ValueError("a bug of gradcli's own")


def unpicklable():
    return lambda: None
