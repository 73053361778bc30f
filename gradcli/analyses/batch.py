"""Check models in worker processes (``gradcli check --jobs N``).

Each worker is a fresh interpreter (the ``spawn`` start method: forking a
process that has started TensorFlow's thread pools is unsafe), so each pays
TensorFlow's start-up (about 2 to 5 s) once and then checks the models it is
handed. That only pays off when the models themselves take longer than the
start-up and there are idle cores; ``bench/batch_speed.py`` measures it.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def check_in_processes(specs: list[str], options, fixed, jobs: int):
    """Yield each model's ``ModelResult`` in the order of ``specs``.

    Closing the generator early (``--fail-fast``) cancels the models not yet
    started and waits for the running ones.
    """
    from gradcli.analyses.check import check_spec

    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(specs)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
    )
    try:
        futures = [pool.submit(check_spec, spec, options, tuple(fixed)) for spec in specs]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _start_worker() -> None:
    from gradcli.tf_import import import_tensorflow

    import_tensorflow()
