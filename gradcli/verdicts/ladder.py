"""The ladder: one-sided difference quotients on a ladder of steps, the
evidence every diagnosis weighs (``refine``, ``nonfinite_analytic``, the joint
check's probes).

Ladder rule: h_k = h0 * 2**-k for k = 0..LADDER, with h0 the central-difference
step of ``finite_diff.step_size`` (eps**(1/3) max(1, |x|)). One-sided quotients
D(h) = (f(x + h) - f(x)) / h have an O(h) error, so each level is combined with
the one above by Richardson, 2 D(h) - D(2h). A level's error estimate is
|D(h) - D(2h)| + round-off (ROUNDOFF_ULPS eps |f| / h), plus its distance to
the next level's Richardson value, plus its largest distance to a smaller
step's value beyond that value's own estimate: at steps near multiples of a
period, quotients agree with each other by aliasing and only smaller steps
expose them. The level with the smallest estimate gives the slope. Going down to
h0 / 2**LADDER also resolves a kink that lies inside the default stencil but
not at the point: there both one-sided slopes agree with the analytic value at
the smaller steps, and the element passes. A kink between the two smallest
levels leaves slopes that do not settle; where a non-smooth op is on the path,
float64 columns whose slopes do not settle go down to h0 / 2**DEEP_LADDER
(``_deepen``); a smooth function keeps the ladder (its unsettled slopes are
what ``inconclusive`` reports).

Locally constant (``constant``, the surrogate rule's evidence): the function
does not change at all, to the last bit, for any of the smallest
``SURROGATE_STEPS`` steps on either side. Jump (``jump``): on a side,
|f(x +- h) - f(x)| does not shrink with h at the ``JUMP_STEPS`` smallest steps.

Near-ties (``near_tie_starts``): a tie is a kink shared by elements of equal
value (a max over them); a near-tie is the same kink at a distance: two
elements of an input whose values differ by a gap g below the step. A max
pool whose window holds two values g apart switches its maximum at x_i +- g,
so every difference at a step above g crosses that kink: the central
difference of the window's maximum reads about 1/2, the left slope g / h,
and where g lies below the ladder's smallest level the one-sided change
f(x - h) - f(x) stays -g: the ladder reads a jump. The same function is
differentiable at the point, and its derivative there is what the analytic
value must match. So where a non-smooth op is on the path, the ladder of an
element whose nearest other value of its input (its competitor, the gap
measured to the nearest distinct value: exact ties are the tie rule's) lies
within ``NEAR_TIE_REACH`` h0 (the central stencil's reach, x +- 2 h0) starts
below the gap, at s0 = g / ``NEAR_TIE_MARGIN``, so that every level of it
lies inside the smooth piece: both one-sided slopes then settle on the
derivative at the point, and a wrong gradient (one split between the near-tied
maxima, or scaled) disagrees with them as anywhere else. s0 is at least h0 /
2**(DEEP_LADDER - LADDER) in float64 (h0 in coarser dtypes, whose ladder is
never deepened), so the smallest level, s0 / 2**LADDER, stays at
or above the deep ladder's h0 / 2**DEEP_LADDER (1e4 ulps of max(1, |x|)):
below it an output's change is lost in its own rounding and the ladder reads
a constant function. A gap below ``NEAR_TIE_MARGIN`` times that floor
cannot be stepped under; it is judged by one-sided slopes
(``_read_one_side``): moving x_i away from its nearest competitor crosses no
kink of theirs, so where the far side's competitor lies beyond the floor's
reach the ladder starts under the far side's gap, and that side's slope,
which converges to the derivative at the point (f is differentiable there:
the values differ), stands for both (a right maximum of a window reads 1 on
its way up, its near-tied partner 0 on its way down; a gradient split
between them reads 1/2 and fails). Competitors within the floor on both
sides leave the ladder from the floor, and its levels below the gap decide
as its error estimate picks them (it counts a level's distance to every
smaller step's value). A near-tie's ladder is not deepened (``_deepen``): it
reaches the deep ladder's smallest step already. The
competitor is any element of the input, not only one of the same window (the
ladder knows no op's structure): a nearby value in another window only costs
a smaller step, with its round-off in the error estimate. Cost: none, the
same evaluations at other steps. ``ColumnSlopes.near_gap`` keeps each
column's gap (NaN when not a near-tie): the report's evidence.

Early stop (``examine_columns``): the worst columns go first, and the ladder
stops once a batch holds an element that is surely a mismatch (the verdict is
then mismatch whatever the rest are). The batches grow from
FIRST_COLUMNS, doubling up to COLUMNS_PER_BATCH: a real bug, whose worst
columns are its clearest, costs the first batch of ladders; a function whose
failing columns are all explained (kinks, a surrogate) is examined in full, in
batches that soon reach the largest. A wrong GELU inside BERT-base's
transformer layer spent 45 s of its layer's 174 s in first batches of 64
columns (1,408 evaluations of the layer each, for 9 failing inputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.numerics.finite_diff import machine_eps, roundoff_ulps, step_size
from gradcli.verdicts import compare

#: Levels below h0: the smallest step is h0 / 2**LADDER (about 6e-9 in float64).
LADDER = 10
#: The deeper ladder (``_deepen``): h0 / 2**DEEP_LADDER, about 6e-12 in float64
#: (1e4 ulps of max(1, |x|)).
DEEP_LADDER = 20
#: The function must be exactly constant at this many of the smallest steps
#: (h0/2**7 .. h0/2**10) on both sides to count as piecewise constant.
SURROGATE_STEPS = 4
#: A jump (``one_sided_ladder``) is looked for at this many of the smallest steps, a
#: factor 2**(JUMP_STEPS - 1) = 8 in h.
JUMP_STEPS = 4
#: ... where |f(x +- h) - f(x)| stays within this factor of its largest value: a
#: function with a finite one-sided slope shrinks it 8-fold over those steps.
JUMP_RATIO = 0.5
#: ... and is over this many times the round-off of f, so the rounding of two
#: evaluation paths (f(x) from the model's call, the ladder's) is no jump.
JUMP_ROUNDOFF = 64
#: Near-ties (module docstring): an element whose nearest distinct value of its
#: input lies within NEAR_TIE_REACH h0 (the central stencil reaches x +- 2 h0)
#: is a near-tie ...
NEAR_TIE_REACH = 2.0
#: ... and its ladder starts at its gap / NEAR_TIE_MARGIN: every level, Richardson's
#: pair at s and 2 s included, then lies at least a factor 2 inside the gap.
NEAR_TIE_MARGIN = 4.0
#: Input elements whose ladders are evaluated in one batch, at most ...
COLUMNS_PER_BATCH = 64
#: ... and in the first batch of ``examine_columns``, which doubles the batch
#: after each (module docstring, early stop).
FIRST_COLUMNS = 8


@dataclass
class ColumnSlopes:
    """The ladder's findings on the examined columns, each ``[output size,
    columns]``: one-sided slopes and their error estimates, ``constant`` and
    ``jump`` (``one_sided_ladder``); ``ran`` ``[columns]``: the columns whose
    ladders ran (the early stop leaves the rest unexamined: NaN slopes)."""

    left: np.ndarray
    right: np.ndarray
    left_err: np.ndarray
    right_err: np.ndarray
    constant: np.ndarray
    jump: np.ndarray
    ran: np.ndarray
    near_gap: np.ndarray | None = None  # [columns]: a near-tie's gap (module docstring), else NaN
    one_side: np.ndarray | None = None  # [columns]: +1/-1 a near-tie read on its right/left side alone
    side_constant: tuple | None = None  # (right, left): ``constant`` of each side alone
    step: np.ndarray | None = None  # [columns]: the default step h0

    def tests(self, a, tol):
        """``slope_tests`` of analytic values ``a`` against these slopes."""
        return slope_tests(a, self.left, self.right, self.left_err, self.right_err, tol)


def examine_columns(fd, pair, f0, a, bad, cols, tol, evidence) -> ColumnSlopes:
    """The ladders of columns ``cols`` (worst first) of the pair's block
    ``a`` (``[output size, input size]``; ``bad``: its failing elements), by
    batches of FIRST_COLUMNS doubling to ``COLUMNS_PER_BATCH``, up to the early
    stop (module docstring), deepened (``_deepen``) where they do not settle.
    Columns not examined stay unexplained."""
    shape = (a.shape[0], len(cols))
    slopes = ColumnSlopes(
        left=np.full(shape, np.nan), right=np.full(shape, np.nan),
        left_err=np.full(shape, np.inf), right_err=np.full(shape, np.inf),
        constant=np.zeros(shape, dtype=bool), jump=np.zeros(shape, dtype=bool),
        ran=np.zeros(len(cols), dtype=bool),
    )
    s = slopes
    starts, s.near_gap, s.one_side, s.step = near_tie_starts(fd, pair.input, cols, evidence)
    s.side_constant = (np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool))
    start, size = 0, FIRST_COLUMNS
    while start < len(cols):
        part = slice(start, start + size)
        found = one_sided_ladder(fd, pair.input, pair.output, f0, cols[part], starts=starts[part])
        for target, value in zip((s.left, s.right, s.left_err, s.right_err, s.constant, s.jump) + s.side_constant,
                                 found):
            target[:, part] = value
        s.ran[part] = True
        _read_one_side(s, s.one_side)
        start, size = start + size, min(2 * size, COLUMNS_PER_BATCH)
        seen = slice(0, start)
        if not s.constant[:, seen].any() and _unexplained_exists(
            a[:, cols[seen]], bad[:, cols[seen]], s.left[:, seen], s.right[:, seen],
            s.left_err[:, seen], s.right_err[:, seen], tol,
        ):
            break
    _deepen(fd, pair, f0, cols, s, tol, evidence)
    return slopes


def near_tie_gaps(flat: np.ndarray, cols) -> tuple[np.ndarray, np.ndarray]:
    """For each element ``flat[c]`` (c in ``cols``), the distances to the
    nearest distinct value of ``flat`` below it and above it (inf when there is
    none): its gaps to its nearest competitors (module docstring, near-ties)."""
    distinct = np.unique(flat)
    values = flat[np.asarray(cols, dtype=np.int64)]
    k = np.searchsorted(distinct, values)
    last = len(distinct) - 1
    with np.errstate(invalid="ignore"):
        below = np.where(k > 0, values - distinct[np.maximum(k - 1, 0)], np.inf)
        above = np.where(k < last, distinct[np.minimum(k + 1, last)] - values, np.inf)
    return below.astype(np.float64), above.astype(np.float64)


def near_tie_starts(fd, name, cols, evidence) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(first step of each column's ladder, its near-tie gap or NaN, the side
    whose slope alone is read: +1 right, -1 left, 0 both, the default step
    h0), each ``[len(cols)]``, by the near-tie rule of the module docstring: h0
    (``step_size``), both sides, except for near-ties on a path with a
    non-smooth op."""
    x = np.asarray(fd.point[name])
    flat = x.reshape(-1)
    dtype = fd.rule_dtype(x.dtype)
    cols = np.asarray(cols, dtype=np.int64)
    h0 = np.asarray(step_size(flat[cols], dtype), dtype=np.float64)
    gaps, sides = np.full(len(cols), np.nan), np.zeros(len(cols), dtype=np.int64)
    if not len(cols) or not np.issubdtype(x.dtype, np.floating):
        return h0, gaps, sides, h0
    below, above = near_tie_gaps(flat, cols)
    gap = np.minimum(below, above)
    near = gap < NEAR_TIE_REACH * h0
    if not near.any() or evidence is None or not evidence.nonsmooth:
        return h0, gaps, sides, h0
    gaps[near] = gap[near]
    # float64 only: coarser dtypes keep the ladder's own range (``_deepen``'s rule).
    floor = h0 * 2.0 ** -(DEEP_LADDER - LADDER) if str(dtype) == "float64" else h0
    # Below the floor, the near side cannot be stepped under: the ladder starts
    # under the far side's gap and reads that side's slope alone.
    far = np.maximum(below, above)
    one_sided = near & (gap / NEAR_TIE_MARGIN < floor) & (far / NEAR_TIE_MARGIN >= floor)
    sides[one_sided] = np.where(above[one_sided] > below[one_sided], 1, -1)
    reach = np.where(one_sided, far, gap)
    starts = np.where(near, np.clip(reach / NEAR_TIE_MARGIN, floor, h0), h0)
    return starts, gaps, sides, h0


def _read_one_side(slopes: ColumnSlopes, sides: np.ndarray) -> None:
    """A near-tie whose near competitor lies below the ladder's reach: the
    slope on the far side (``sides``: +1 right, -1 left) crosses no kink at
    any level and is the derivative at the point; the near side's, which
    crosses the competitor at every level, is replaced by it, its jump
    (the change f(x -+ h) - f(x) stays the gap times a slope: no
    discontinuity) is dropped, and whether f is locally constant is read on
    the far side alone."""
    s = slopes
    right, left = sides > 0, sides < 0
    s.left[:, right], s.left_err[:, right] = s.right[:, right], s.right_err[:, right]
    s.right[:, left], s.right_err[:, left] = s.left[:, left], s.left_err[:, left]
    s.jump[:, sides != 0] = False
    if s.side_constant is not None:
        s.constant[:, right], s.constant[:, left] = s.side_constant[0][:, right], s.side_constant[1][:, left]


def slope_tests(a, left, right, left_err, right_err, tol):
    """The ladder's tests of analytic values ``a`` against one-sided slopes
    and their error estimates (module docstring), each a boolean array:
    ``gap`` (the slopes differ beyond their errors), ``settled``
    (``_settled``), ``between`` (``a`` within [left, right], with the element
    rule's margin) and ``agrees`` (``a`` agrees with both slopes). Shared by
    ``refine``, by its early stop and by the joint check's probes
    (``check._JointCheck.settle_on_kinks``)."""
    with np.errstate(invalid="ignore"):
        gap = np.abs(left - right) > compare.allowed_error(left, right, left_err + right_err, tol)
        settled = _settled(left, right, left_err, right_err, tol)
        lo, hi = np.minimum(left, right), np.maximum(left, right)
        margin = compare.allowed_error(a, hi, np.maximum(left_err, right_err), tol)
        between = (a >= lo - margin) & (a <= hi + margin)
        agrees = (np.abs(a - right) <= compare.allowed_error(a, right, right_err, tol)) & (
            np.abs(a - left) <= compare.allowed_error(a, left, left_err, tol)
        )
    return gap, settled, between, agrees


def outside_both(a, left, right, left_err, right_err, tol):
    """The analytic value farther from each finite one-sided slope than the
    element rule allows with that slope's error estimate."""
    with np.errstate(invalid="ignore"):
        return (
            np.isfinite(left) & np.isfinite(right)
            & (np.abs(a - left) > compare.allowed_error(a, left, left_err, tol))
            & (np.abs(a - right) > compare.allowed_error(a, right, right_err, tol))
        )


#: The central difference refutes an analytic value on its own, however the
#: ladder's slopes settle, when it is off by more than this many times the
#: element rule's allowance (``compare.allowed_error``, which already holds
#: FD_SAFETY = 2 times its error estimate: so at least 4 times the estimate)
#: and both one-sided slopes lie nearer it than the analytic value
#: (``central_refutes``). Why both: a central difference is fooled where a
#: kink lies inside its stencil or the function varies too fast for its
#: step (float16's h = 0.1 max(1, |x|)), and its Richardson estimate need not
#: show it; the smaller steps of the ladder do, by siding with the analytic
#: value. Measured on 16-bit two-layer nets (tanh, sigmoid, sin, softplus,
#: exp; float16 and bfloat16), the unresolved elements of correct models: 134,
#: 71 of them off by more than 3 allowances, none with both slopes nearer the
#: central difference; of the same nets with a gradient 2x off: 166 of 175
#: with both slopes nearer it, up to 6.3 allowances (37 times the estimate).
#: The factor keeps out elements barely outside the rule, whose noisy slopes
#: may side with either value by chance.
REFUTE_FACTOR = 2.0


def central_refutes(a, n, fd_error, left, right, tol):
    """The central difference ``n`` (error estimate ``fd_error``) refutes the
    analytic value ``a`` on its own (``REFUTE_FACTOR``): off by more than that
    many allowances, and both one-sided slopes nearer ``n`` than ``a``."""
    with np.errstate(invalid="ignore"):
        far = np.abs(a - n) > REFUTE_FACTOR * compare.allowed_error(a, n, fd_error, tol)
        sides = (np.abs(left - n) < np.abs(left - a)) & (np.abs(right - n) < np.abs(right - a))
        return far & sides & np.isfinite(left) & np.isfinite(right)


def _settled(left, right, left_err, right_err, tol):
    """Both one-sided slopes finite and resolved: each error estimate, with the
    element rule's safety factor, within atol + ``Tolerance.resolve`` of the
    slope (``compare``'s inconclusive rule)."""
    with np.errstate(invalid="ignore"):
        slope = np.maximum(np.abs(left), np.abs(right))
        return (
            np.isfinite(left) & np.isfinite(right)
            & (compare.FD_SAFETY * np.maximum(left_err, right_err)
               <= tol.atol + tol.resolve * slope)
        )


def _unexplained_exists(a, bad, left, right, left_err, right_err, tol) -> bool:
    """Some failing element is surely a mismatch: its one-sided slopes settle,
    agree with each other, and not with the analytic value."""
    gap, settled, _, agrees = slope_tests(a, left, right, left_err, right_err, tol)
    return bool(np.any(bad & settled & ~gap & ~agrees))


def _deepen(fd, pair, f0, cols, slopes: ColumnSlopes, tol, evidence) -> None:
    """Deeper ladders (``DEEP_LADDER``) for the float64 columns whose slopes did
    not settle, where a non-smooth op is on the path: a kink at distance d from
    x is resolved only by levels below d, and one that falls between the two
    smallest levels leaves slopes that do not settle. A network whose
    activations shrink near the default step (MobileNetV2 at random init: 900
    relu6 inputs of one layer within 6e-6 of 0) puts a few elements in that
    band. Smooth functions keep the ladder: their unsettled slopes (aliasing,
    ill-conditioning) are what the inconclusive verdict reports. Updates the
    columns in place."""
    if str(fd.rule_dtype(fd.point[pair.input].dtype)) != "float64":
        return
    s = slopes
    with np.errstate(invalid="ignore"):
        unsettled = ~_settled(s.left, s.right, s.left_err, s.right_err, tol) & ~s.constant
        unsettled = s.ran & unsettled.any(axis=0)
    if s.near_gap is not None:  # a near-tie's ladder reaches the deep ladder's step already
        unsettled &= np.isnan(s.near_gap)
    where = np.flatnonzero(unsettled)
    if not len(where) or not evidence.nonsmooth:
        return
    found = one_sided_ladder(fd, pair.input, pair.output, f0, cols[where], levels=DEEP_LADDER)
    targets = (s.left, s.right, s.left_err, s.right_err, s.constant, s.jump)
    for target, value in zip(targets, found):
        target[:, where] = value


def one_sided_ladder(fd, name, output, f0, cols, levels: int = LADDER, starts=None):
    """One-sided slopes of ``output`` along unit vectors e_c (c in ``cols``),
    from h0 = ``step_size`` down, or from ``starts`` ``[len(cols)]`` (a
    near-tie's first step, ``near_tie_starts``).

    Returns left, right, their error estimates (``[output size, len(cols)]``),
    ``constant``: f unchanged at the SURROGATE_STEPS smallest steps on both sides
    (then the same on the right side alone and on the left side alone, last),
    and ``jump``: on a side, |f(x +- h) - f(x)| does not shrink with h at the
    JUMP_STEPS smallest steps (``JUMP_RATIO``, above ``JUMP_ROUNDOFF`` times f's
    round-off): f is discontinuous at x, as a mask ``x != 0`` at an exact 0 makes it.
    """
    x = fd.point[name]
    flat = x.reshape(-1)
    dtype = fd.rule_dtype(x.dtype)
    eps = machine_eps(dtype)
    f0 = np.asarray(f0, dtype=dtype).reshape(-1)
    scales = 2.0 ** -np.arange(levels + 1)
    keys = ("left", "right", "left_err", "right_err", "constant", "jump", "constant_right", "constant_left")
    parts = {k: [] for k in keys}
    for start in range(0, len(cols), COLUMNS_PER_BATCH):
        chunk = cols[start : start + COLUMNS_PER_BATCH]
        h0 = step_size(flat[chunk], dtype) if starts is None else np.asarray(
            starts[start : start + COLUMNS_PER_BATCH]).astype(flat.dtype)
        # [levels, columns]: exactly representable steps, as in along_axes.
        xs = flat[chunk][None, :]
        plus = (xs + h0[None, :] * scales[:, None]) - xs
        minus = xs - (xs - h0[None, :] * scales[:, None])
        fp, fm = _one_sided_points(fd, name, output, chunk, h0[None, :] * scales[:, None])  # [level, column, out]
        values = np.stack([fp, fm])
        d_right = (fp - f0) / plus[:, :, None]
        d_left = (f0 - fm) / minus[:, :, None]
        fmax = np.maximum(np.abs(values).max(axis=(0, 1)), np.abs(f0))  # [column, out]

        # A function computing in a coarser dtype than x rounds x +- h there, so
        # the step taken is known only to eps |x|: the slope to |d| eps |x| / h.
        x_round = eps * np.abs(flat[chunk])[None, :, None] if dtype != x.dtype else 0.0

        r, re = _best_slopes(d_right, plus, fmax, dtype, x_round)
        l, le = _best_slopes(d_left, minus, fmax, dtype, x_round)
        # Locally constant: the smallest steps' values on both sides are one
        # value to the last bit, and it is f(x) up to the round-off of another
        # evaluation path (f(x) comes from the model's own call, the ladder
        # from the differences' traced loop, which may sum in another order).
        near_f0 = lambda ref: np.abs(ref - f0[None, :]) <= roundoff_ulps(dtype) * eps * np.abs(f0[None, :])  # noqa: E731
        ref = fp[-1]
        same = (fp[-SURROGATE_STEPS:] == ref) & (fm[-SURROGATE_STEPS:] == ref) & near_f0(ref)
        # ... and each side on its own (a near-tie read on one side, ``_read_one_side``).
        for key, side in (("constant_right", fp), ("constant_left", fm)):
            parts[key].append(((side[-SURROGATE_STEPS:] == side[-1]) & near_f0(side[-1])).all(axis=0).T)
        parts["right"].append(r)
        parts["right_err"].append(re)
        parts["left"].append(l)
        parts["left_err"].append(le)
        parts["constant"].append(same.all(axis=0).T)
        floor = JUMP_ROUNDOFF * roundoff_ulps(dtype) * eps * fmax  # [column, out]
        jump = np.zeros(floor.shape, dtype=bool)
        for side in (fp, fm):
            tail = np.abs(side[-JUMP_STEPS:] - f0)  # [level, column, out]
            low = tail.min(axis=0)
            jump |= (low >= JUMP_RATIO * tail.max(axis=0)) & (low > floor)
        parts["jump"].append(jump.T)
    return tuple(np.concatenate(parts[k], axis=1) for k in keys)


def _best_slopes(d, steps, fmax, dtype, x_round=0.0):
    """The ladder's slope and error estimate from one-sided quotients ``d``
    ``[level, column, out]`` at ``steps`` ``[level, column]`` (module
    docstring's ladder rule), each ``[out, column]``; ``fmax`` ``[column, out]``."""
    eps = machine_eps(dtype)
    rich = 2.0 * d[1:] - d[:-1]
    # A level counts only when its neighbour confirms it: at steps far
    # too large for the function, two quotients can agree by chance.
    confirm = np.abs(np.diff(rich, axis=0))
    confirm = np.concatenate([confirm, confirm[-1:]], axis=0)
    err = np.abs(d[1:] - d[:-1]) + confirm + (
        2 * roundoff_ulps(dtype) * eps * fmax[None] + x_round * np.abs(d[1:])
    ) / steps[1:, :, None]
    # ... and so must every smaller step, within both error estimates:
    # quotients sampled near multiples of a period agree with each other
    # (aliasing) and are only exposed by the steps below them.
    own = err.copy()
    with np.errstate(invalid="ignore"):
        for k in range(len(rich) - 1):
            excess = np.abs(rich[k + 1:] - rich[k]) - own[k + 1:]
            excess = np.where(np.isnan(excess), -np.inf, excess).max(axis=0)
            err[k] = np.fmax(err[k], excess)
    pick = np.argmin(err, axis=0)
    take = lambda arr: np.take_along_axis(arr, pick[None], axis=0)[0]  # noqa: E731
    return take(rich).T, take(err).T  # -> [out, column]


def directional_slopes(fd, directions: dict, h: np.ndarray, f0, output, levels: int = LADDER):
    """One-sided slopes of ``output`` along joint directions (``directions``:
    input -> ``[k, *shape]``, the steps ``h`` ``[k]`` of ``along_joint``), by
    the ladder rule: (left, right, left error, right error), each ``[out, k]``.
    The joint check's evidence for a kink along its probes (``check._JointCheck``)."""
    dtype = fd.rule_dtype(fd.point[next(iter(directions))].dtype)
    scales = 2.0 ** -np.arange(levels + 1)
    steps = h[None, :] * scales[:, None]  # [level, k]
    k = len(h)
    up, down = fd.joint_pairs(directions, steps)  # level-major
    shape = (levels + 1, k, -1)
    fp, fm = np.asarray(up[output]).reshape(shape), np.asarray(down[output]).reshape(shape)
    f0 = np.asarray(f0, dtype=fp.dtype).reshape(-1)
    fmax = np.maximum(np.abs(np.stack([fp, fm])).max(axis=(0, 1)), np.abs(f0))
    r, re = _best_slopes((fp - f0) / steps[:, :, None], steps, fmax, dtype)
    l, le = _best_slopes((f0 - fm) / steps[:, :, None], steps, fmax, dtype)
    return l, r, le, re


def _one_sided_points(fd, name, output, chunk, steps):
    """f(x + s e_c) and f(x - s e_c) for c = chunk[j], s = steps[l, j], each
    ``[level, column, output size]``: the finite-difference engine's own
    evaluation of unit steps (in place, no copy of x per point;
    ``FiniteDifferences.axis_pairs``). The points are fl(x + s) and fl(x - s),
    so the steps taken are the ladder's exactly representable ``plus`` and
    ``minus``."""
    levels, k = steps.shape
    up, down = fd.axis_pairs(name, np.tile(np.asarray(chunk), levels), steps.reshape(-1))
    shape = (levels, k, -1)
    return np.asarray(up[output]).reshape(shape), np.asarray(down[output]).reshape(shape)
