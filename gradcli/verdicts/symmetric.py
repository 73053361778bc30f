"""The symmetric rule: an input that an op reads as a symmetric matrix.

``tf.linalg.cholesky`` reads one triangle of its input (the lower), and
TensorFlow's gradient of it is the symmetric one, (G + G^T) / 2: the
derivative on the symmetric matrices, the op's domain. Along one
off-diagonal entry alone that is not the derivative of what the op computes:
finite differences see a lower entry move the factor as the pair of entries
does, and an upper entry not at all. Compared element by element, a correct
model fails (a multivariate normal's log-density with its covariance as the
input, TensorFlow Probability's ``CholeskyOuterProduct`` inverted), and the
culprit search named TensorFlow's Cholesky.

Along the symmetric directions of each matrix, E_ij + E_ji (E_ii on the
diagonal), both sides are the same derivative. Derivatives are linear in the
direction, so the numeric and analytic derivatives along them, and the
error estimates, are the sums of the two elements' (no evaluation is added).

Rule (``symmetric_pass``): a mismatch pair whose input is square in its last
two axes, and whose path holds an op of ``SYMMETRIC_INPUT_OPS`` (the
evidence, from the traced graph), is compared again along the symmetric
directions by the element rule (``compare.compare_block``). When every one
agrees, the pair passes, and a warning says what was compared and why; else
the mismatch stands and is refined as any other. An op's own check
(``local_check``) probes such an op along symmetric directions too
(``symmetric_direction``), so it is never the culprit of another's bug.

``tf.linalg.eigh`` reads one triangle as well, but its gradient is that
triangle's (lower-triangular): it agrees element by element and needs no
rule (measured: ``eigh`` of a raw 3x3 input passes).
"""

from __future__ import annotations

import numpy as np

from gradcli.results import EXPLANATIONS, PASS
from gradcli.verdicts import compare
from gradcli.verdicts.diagnosis import Diagnosis
from gradcli.verdicts.phrases import count, site_list

#: Op type -> the call that makes it: ops that read their input as a
#: symmetric matrix and whose gradient is the symmetric one.
SYMMETRIC_INPUT_OPS = {"Cholesky": "tf.linalg.cholesky"}


def symmetric_readers(graph, name: str, output: str) -> list | None:
    """The ops of ``SYMMETRIC_INPUT_OPS`` on the path from ``name`` to
    ``output`` (as ``GraphSite``); None when the graph cannot be traced."""
    if graph is None or not graph.trace():
        return None
    return [
        graph.site(op, f"{op.type} ({SYMMETRIC_INPUT_OPS[op.type]}) at {graph.location(op) or op.name}")
        for op in graph.path_ops(name, output) if op.type in SYMMETRIC_INPUT_OPS
    ]


def symmetric_direction(u: np.ndarray) -> np.ndarray:
    """``u`` made symmetric in its last two axes, (u + u^T) / 2: a direction
    an op of ``SYMMETRIC_INPUT_OPS`` is defined along."""
    return (u + np.swapaxes(u, -1, -2)) / 2


def _symmetric_columns(x_shape) -> tuple[np.ndarray, np.ndarray] | None:
    """Flat element pairs (ij, ji) with i <= j of every matrix of an input of
    shape ``x_shape`` (square in its last two axes), or None."""
    if len(x_shape) < 2 or x_shape[-1] != x_shape[-2] or x_shape[-1] < 2:
        return None
    m = x_shape[-1]
    i, j = np.triu_indices(m)
    batch = int(np.prod(x_shape[:-2], dtype=np.int64))
    start = (np.arange(batch) * m * m)[:, None]
    return (start + i * m + j).ravel(), (start + j * m + i).ravel()


def symmetric_pass(pair, analytic, numeric, fd_error, x_shape, y_shape, tol, graph) -> Diagnosis | None:
    """The rule of the module docstring: a passing ``Diagnosis`` for a
    mismatch ``pair`` that agrees along every symmetric direction of its
    input, which an op of ``SYMMETRIC_INPUT_OPS`` on its path reads; None
    otherwise. ``analytic``, ``numeric`` and ``fd_error`` are ``[output size,
    input size]``. On a pass the pair's figures become those along the
    symmetric directions."""
    columns = _symmetric_columns(tuple(x_shape))
    if columns is None:
        return None
    try:
        readers = symmetric_readers(graph, pair.input, pair.output)
    except Exception:  # noqa: BLE001 - graph analysis is a bonus: no evidence, no excuse
        return None
    if not readers:
        return None
    upper, lower = columns
    diagonal = upper == lower

    def along(block):  # sums of each pair of elements: the derivative along E_ij + E_ji
        return block[:, upper] + np.where(diagonal, 0.0, block[:, lower])

    m = x_shape[-1]
    directions = (int(np.prod(x_shape[:-2], dtype=np.int64)), m * (m + 1) // 2)
    shape = x_shape[:-2] + (directions[1],)
    again = compare.compare_block(pair.input, pair.output, along(analytic), along(numeric), along(fd_error),
                                  y_shape, shape, tol)
    if again.verdict != PASS:
        return None
    pair.max_abs_error, pair.max_rel_error = again.max_abs_error, again.max_rel_error
    pair.fd_error, pair.compared = again.fd_error, again.compared
    pair.worst, pair.failing, pair.n_failing = None, [], 0
    each = f"each {m}x{m} matrix" if directions[0] > 1 else f"the {m}x{m} matrix"
    return Diagnosis(PASS, False, EXPLANATIONS[PASS] + " along symmetric directions", warnings=[
        f"{pair.input} is read as a symmetric matrix by {site_list(readers)}: TensorFlow's gradient "
        f"there is the symmetric one, so it was compared along the "
        f"{count(directions[1], 'symmetric direction')} E_ij + E_ji of {each}, where it agrees "
        "with finite differences; along one off-diagonal entry alone it is not the derivative, "
        "by that convention",
    ])
