"""Model files run in supervised worker processes: ``batch`` (``check_batch``,
``supervise``, ``run_isolated``: a model that ends its process becomes an
error row, never the end of the run) and ``isolation`` (the state a worker
restores after each model). It imports the checks (``analyses.check``); they
import nothing from here (how a process ended is worded by ``errors``).
"""
