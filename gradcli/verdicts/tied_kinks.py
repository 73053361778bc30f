"""Kinks on ties: where a kink element shares its value with others.

Tie rule (``tie_direction``): the one-sided slopes along a single element bound
a subgradient only where that element is non-smooth on its own. At a tie (a max
over several equal elements) the tied values are moved together too, and a
wrong derivative along that direction fails the kink. Shared kinks
(``shared_kinks``): the evidence the layer pass's tie rule asks for, whether a
kink element outside its own slopes moves kinks that other elements move too.
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics.finite_diff import machine_eps, roundoff_ulps, step_size
from gradcli.results import Element, PairResult
from gradcli.verdicts import compare
from gradcli.verdicts.ladder import directional_slopes, slope_tests
from gradcli.verdicts.phrases import count


def _holders(values, arrays) -> np.ndarray:
    """How many elements of ``arrays`` hold each of ``values`` exactly: more
    than one is a tie (``tie_direction``, ``shared_kinks``)."""
    counts = np.zeros(len(values), dtype=np.int64)
    for array in arrays:
        ordered = np.sort(array)
        counts += np.searchsorted(ordered, values, "right") - np.searchsorted(ordered, values, "left")
    return counts


#: Seeds the weights of ``tie_direction``'s groups (a fixed draw: the same
#: direction on every run).
TIE_SEED = 20
#: Most output rows ``tie_direction`` reports on in a warning.
TIE_ROWS_SHOWN = 3


def tie_direction(fd, pair: PairResult, f0, a, cols, kinks, tol, others=None) -> np.ndarray | None:
    """The tie rule of ``refine``: which kink elements ``kinks`` ``[out,
    len(cols)]`` are no subgradient, as the same mask; None when no kink sits
    on a tie or the test says nothing. ``others(names)``: the analytic blocks
    ``[out, size]`` (None: disconnected) of other differentiated inputs, for
    ties across inputs (``max(x, y)`` at x = y); without it, ties within the
    pair's input only.

    The one-sided slopes along a single element bound a subgradient only where
    that element is non-smooth on its own. At a tie (a max over several equal
    elements) a gradient can lie between every element's slopes and still be
    none: one that sends the full upstream gradient to every tied element of a
    max. Evidence that needs no structure of the op: let d move every
    differentiated element (of the pair's input, and of the other inputs of
    its dtype) whose value is v by a_v (a_v standard normal, one per tied
    value v held by a kink element; 0 elsewhere). Every tie is kept along d
    and no new one is made (for steps below the gaps between values), so every
    piece active at x stays active and they agree there: f is differentiable
    along d, and every selection of a piece's gradient (what TensorFlow's max,
    max pool and sort gradients take), or any convex combination of them, has
    <g, d> equal to that derivative. So where both one-sided slopes along d
    (``directional_slopes``, the ladder rule) settle and agree with each other,
    an analytic <g, d> that disagrees with them (``slope_tests``) is no
    subgradient: the kinks of that output row fail. Where the slopes along d
    differ (a tie at a threshold of another non-smooth op, as equal relu
    inputs at exactly 0), the test says nothing and the elements keep their
    single-element verdicts."""
    x = np.asarray(fd.point[pair.input])
    flat = x.reshape(-1)
    kink_values = np.unique(flat[np.asarray(cols)[kinks.any(axis=0)]])
    candidates = [pair.input] + [
        n for n in fd.wrt if n != pair.input and others is not None and np.asarray(fd.point[n]).dtype == x.dtype
    ]
    held = {n: np.asarray(fd.point[n]).reshape(-1) for n in candidates}
    tied_values = kink_values[_holders(kink_values, held.values()) > 1]
    if not len(tied_values):
        return None
    weights = np.random.default_rng(TIE_SEED).standard_normal(len(tied_values))

    def moves(values):
        d = np.zeros(values.shape, dtype=x.dtype)
        where = np.searchsorted(tied_values, values)
        hit = (where < len(tied_values)) & (tied_values[np.minimum(where, len(tied_values) - 1)] == values)
        d[hit] = weights[where[hit]]
        return d

    moved = {n: moves(v) for n, v in held.items()}
    moved = {n: d for n, d in moved.items() if n == pair.input or d.any()}
    holders = list(moved)
    along = np.asarray(a) @ moved[pair.input].astype(np.float64)
    if len(moved) > 1:
        wanted = [n for n in moved if n != pair.input]
        blocks = others(wanted)
        if set(blocks) != set(wanted):  # a gradient of the wrong shape: no derivative along d to compare
            return None
        for n, block in blocks.items():
            if block is not None:  # None: disconnected, no term
                along = along + np.asarray(block, dtype=np.float64) @ moved[n].astype(np.float64)
    else:
        # The engine evaluates whole input groups: the group's other inputs stay.
        moved = {**{n: np.zeros(np.size(fd.point[n]), np.asarray(fd.point[n]).dtype)
                    for n in fd.group(pair.input)}, **moved}
    directions = {n: d.reshape((1,) + np.shape(fd.point[n])) for n, d in moved.items()}
    h = fd.direction_steps(directions)
    left, right, left_err, right_err = directional_slopes(fd, directions, h, f0, pair.output)
    along = along[:, None]
    gap, settled, _, agrees = slope_tests(along, left, right, left_err, right_err, tol)
    wrong = (~gap & settled & ~agrees)[:, 0]
    on_ties = kinks & np.isin(flat[np.asarray(cols)], tied_values)[None, :]
    refused = on_ties & wrong[:, None]
    if not refused.any():
        return None
    rows = np.flatnonzero(refused.any(axis=1))
    numeric = 0.5 * (left[:, 0] + right[:, 0])
    error = np.maximum(left_err[:, 0], right_err[:, 0])
    pair.n_tie_refused = len(rows)
    pair.tie_refused = [
        Element(
            output_index=compare.element_index(r, np.shape(f0)), input_index=[], analytic=float(along[r, 0]),
            numeric=float(numeric[r]), abs_error=float(abs(along[r, 0] - numeric[r])),
            rel_error=float(abs(along[r, 0] - numeric[r]) / max(abs(along[r, 0]), abs(numeric[r]))),
            fd_error=float(error[r]),
        )
        for r in rows[:TIE_ROWS_SHOWN]
    ]
    shown = "; ".join(
        f"{pair.output}{e.output_index}: analytic {e.analytic:.6g}, numeric {e.numeric:.6g}"
        for e in pair.tie_refused
    )
    pair.warnings.append(
        f"{len(tied_values)} values are shared by several elements of {' and '.join(holders)} at "
        "kinks; moving each such group together (where the function is differentiable: its one-sided slopes agree), "
        f"the analytic derivative of {count(len(rows), 'output element')} disagrees with the numeric "
        f"one ({shown}): no subgradient there, although each element lies between its own slopes"
    )
    return refused


#: Kink elements outside their slopes that ``shared_kinks`` tests (worst first).
SHARED_TESTED = 8


def shared_kinks(fd, pair: PairResult, f0, cols, kink_bad, kinks) -> bool | None:
    """Whether each of the first ``SHARED_TESTED`` kink elements outside their
    own slopes (``kink_bad``, ``[out, len(cols)]``) shares its non-smoothness
    with other kink elements of its input; None when none is on a tie.

    An element's one-sided slopes bound a subgradient where the function is
    separable in it: a relu of that element alone. Where the element moves
    kinks that other elements move too (a tied maximum; a zero row of a dense
    layer's input, whose elements all move the row's relu kinks at 0), a valid
    subgradient can lie outside them, and the layer pass's tie rule
    (``analyses.by_layer._on_ties``) may judge it at nearby points. The
    evidence: u, positive weights (a fixed draw) on the input's other kink
    elements, and the mixed difference D(h) = f(x + h e_i + h u) - f(x + h e_i)
    - f(x + h u) + f(x). Separable in x_i, D is 0 to round-off; a smooth
    coupling gives h**2 f_iu (D(h/2) = D(h)/4); a shared kink gives a term
    linear in h (D(h/2) = D(h)/2). Shared: |D(h)| above 100 times its
    round-off and D(h/2) / D(h) within 1/2 +- 1/8, in some output element."""
    x = np.asarray(fd.point[pair.input])
    flat = x.reshape(-1)
    bad_cols = np.asarray(cols)[kink_bad.any(axis=0)][:SHARED_TESTED]
    if not (_holders(flat[bad_cols], [flat]) > 1).any():
        return None
    kink_cols = np.asarray(cols)[kinks.any(axis=0)]
    weights = 0.5 + np.abs(np.random.default_rng(TIE_SEED + 1).standard_normal(len(kink_cols)))
    dtype = fd.rule_dtype(x.dtype)
    h = float(step_size(np.abs(flat).max(initial=0.0), dtype))
    f0 = np.asarray(f0, dtype=np.float64).reshape(-1)
    points = []
    for i in bad_cols:
        u = np.zeros(flat.size)
        u[kink_cols] = weights
        u[i] = 0.0
        for step in (h, h / 2):
            both, alone, others = flat.astype(np.float64), flat.astype(np.float64), flat.astype(np.float64)
            both[i] += step
            both += step * u
            alone[i] += step
            others += step * u
            points += [both, alone, others]
    values_at = np.asarray(fd.evaluate(pair.input, np.stack(points).reshape((-1,) + x.shape))[pair.output],
                           dtype=np.float64).reshape(len(bad_cols), 2, 3, -1)
    mixed = values_at[:, :, 0] - values_at[:, :, 1] - values_at[:, :, 2] + f0[None, None, :]
    noise = 100 * 4 * roundoff_ulps(dtype) * machine_eps(dtype) * np.maximum(
        np.abs(values_at).max(axis=2), np.abs(f0)[None, None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = mixed[:, 1] / mixed[:, 0]
    linear = (np.abs(mixed[:, 0]) > noise[:, 0]) & (np.abs(ratio - 0.5) <= 0.125)
    return bool(linear.any(axis=1).all())
