"""Model files run in supervised worker processes: ``batch`` (``check_batch``,
``check_batch``, ``supervise``, ``run_isolated``: a model that ends its
process becomes an error row, never the end of the run), ``isolation`` (the
state a worker restores after each model) and ``deaths`` (how a worker ended,
in words). It imports the checks (``analyses.check``); they import only
``deaths`` from here, so no import circle runs through a worker.
"""
