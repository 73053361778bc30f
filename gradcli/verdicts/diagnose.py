"""Diagnoses: say *what* a failing comparison is looking at.

A central difference that disagrees with the analytic derivative is not always a
bug. ``refine`` re-examines the failing elements of a pair with one-sided
difference quotients on a ladder of steps and reclassifies them. An excuse is
earned only with evidence from the traced graph (``excuses``); the finite
differences alone never excuse a failure:

* ``kink``: the slopes from the left and from the right differ beyond their
  own error estimates AND a non-smooth op lies on the path
  (``excuses.nonsmooth``: relu, abs, max/min, tf.where, clip, a branch...). The
  analytic value is a valid subgradient when it lies between the slopes (not a
  failure); outside, it is a failure. Slopes that differ with no non-smooth op
  on the path are an ill-conditioned smooth function, never a kink:
  ``inconclusive`` (a failure), or ``mismatch`` when both slopes settle and the
  analytic value lies outside them. At a tie (a kink element whose value other
  elements of its input hold) between its slopes is not enough: the tied
  values are moved together too (``tie_direction``), and a wrong derivative
  there fails the kink. Passing and zero pairs are scanned too:
  ``kink_suspects`` flags every element whose one-sided slopes from the
  central-difference evaluations (``finite_diff.one_sided``) disagree, and the
  ladder confirms them (a tie of a max passes the central difference). Slopes
  that agree are never a kink: an element that fails only because a kink lies
  inside the default step (or because the function varies too fast for it)
  passes when both settled slopes agree with the analytic value at smaller
  steps, with a warning that says which.
* ``surrogate``: the function does not change at all, to the last bit, for any
  of the smallest ``SURROGATE_STEPS`` steps on either side (it is piecewise
  constant here) while the analytic derivative is not zero, AND a straight-
  through estimator on the path (``excuses.straight_through``: FakeQuant*, an
  overridden quantizer gradient, ``x + stop_gradient(q(x) - x)``, a
  ``tf.custom_gradient`` around a quantizer) explains the element: with the
  estimators' results held constant the gradient left there is zero
  (``excuses.gradient_beside``). A failure unless surrogates are allowed.
  Without an estimator the element is a ``mismatch`` (an op bug such as an
  overwritten scatter or stitch entry), and the op whose own gradient is wrong
  is named (``ModelGraph.culprit``); without a traced graph, ``inconclusive``.
* elements whose slopes do not settle (error estimate, times ``FD_SAFETY``,
  over ``atol`` + ``Tolerance.resolve`` of the slope) are ``inconclusive``,
  unless the slopes agree with each other and the analytic value lies outside
  both of them by more than the element rule allows with their own error
  estimates: unsettled slopes still bound the derivative, so that is a
  ``mismatch`` (16-bit compute, whose one-sided slopes rarely settle to a
  tenth, against a gradient 2x off).
* anything else stays ``mismatch``.

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

NaN rule at the point (``nonfinite_analytic``): an analytic NaN/Inf where the
ladder's slopes are finite, settled and equal is a wrong gradient (mismatch);
otherwise the point is a genuine singularity (exit 3). Both name the op of the
first non-finite value (``first_nonfinite``).

``explain`` adds the rest once the pairs are compared: where the graph cuts a
disconnected or zero path, the culprit op of a mismatch, and the Taylor test.
"""

from __future__ import annotations

import os

import numpy as np

from gradcli.verdicts import compare, excuses
from gradcli.errors import ModelError
from gradcli.numerics.autodiff import graph_gradients
from gradcli.numerics.finite_diff import machine_eps, roundoff_ulps, step_size
from gradcli.results import (
    DISCONNECTED,
    EXPLANATIONS,
    INCONCLUSIVE,
    KINK,
    MISMATCH,
    PASS,
    SURROGATE,
    ZERO,
    Culprit,
    Element,
    Kink,
    PairResult,
)

#: Levels below h0: the smallest step is h0 / 2**LADDER (about 6e-9 in float64).
LADDER = 10
#: The deeper ladder (``_deepen``): h0 / 2**DEEP_LADDER, about 6e-12 in float64
#: (1e4 ulps of max(1, |x|)).
DEEP_LADDER = 20
#: The function must be exactly constant at this many of the smallest steps
#: (h0/2**7 .. h0/2**10) on both sides to count as piecewise constant.
SURROGATE_STEPS = 4
#: A jump (``_ladder``) is looked for at this many of the smallest steps, a
#: factor 2**(JUMP_STEPS - 1) = 8 in h.
JUMP_STEPS = 4
#: ... where |f(x +- h) - f(x)| stays within this factor of its largest value: a
#: function with a finite one-sided slope shrinks it 8-fold over those steps.
JUMP_RATIO = 0.5
#: ... and is over this many times the round-off of f, so the rounding of two
#: evaluation paths (f(x) from the model's call, the ladder's) is no jump.
JUMP_ROUNDOFF = 64
#: Input elements whose ladders are evaluated in one batch.
COLUMNS_PER_BATCH = 64
#: How many kinks a report keeps.
MAX_KINKS = 10
#: Columns of a passing pair whose kink suspects are examined on the ladder
#: (22 evaluations each): a bound on what the kink scan costs.
SCAN_COLUMNS = 4 * COLUMNS_PER_BATCH


def require_finite(model_name, input_name, output, values, output_shape, input_shape, what,
                   locate=None):
    """Raise a ModelError naming input, output and element if ``values``
    (``[output size, input size]``) hold NaN or Inf; ``locate(column)``, if given,
    adds where the non-finite value comes from (``nonfinite_step``)."""
    values = np.asarray(values)
    if np.all(np.isfinite(values)):
        return
    row, col = (int(i) for i in np.argwhere(~np.isfinite(values))[0])
    out_index = compare._index(row, output_shape)
    in_index = compare._index(col, input_shape)
    why = "" if what == "analytic derivative" else (
        ": the function is not finite within a step of the point"
    )
    if locate is not None:
        try:
            why += locate(col)
        except Exception:  # locating is a bonus: the message stands without it
            pass
    raise ModelError(
        f"{model_name}: the {what} of {_label(output, out_index)} with respect to "
        f"{_label(input_name, in_index)} is {values[row, col]} at the point{why}"
    )


def nonfinite_step(fd, graph, input_name, output, col) -> str:
    """For a finite difference that is not finite: which of the points x +- h,
    x +- 2h along element ``col`` gives a non-finite output, and the op of the
    first non-finite value there (``first_nonfinite`` without the gradient)."""
    from gradcli.numerics.finite_diff import LEVELS

    x = fd.point[input_name]
    flat = x.reshape(-1)
    h = step_size(flat[col : col + 1], x.dtype)
    h = float(((flat[col : col + 1] + h) - flat[col : col + 1])[0])
    points = []
    for level in LEVELS:
        p = flat.copy()
        p[col] += level * h
        points.append(p.reshape(x.shape))
    values = fd.evaluate(input_name, np.stack(points))[output]
    for level, point, value in zip(LEVELS, points, values):
        if not np.all(np.isfinite(value)):
            site = first_nonfinite(graph, input_name, output, at=point, gradient=False) if graph else ""
            step = f"{'+' if level > 0 else '-'} {abs(level):g} h (h = {h:.3g})"
            return f" (at {_label(input_name, compare._index(col, x.shape))} {step}" + (
                f"; the first non-finite value comes from {site})" if site else ")"
            )
    return ""


def raised(exc: BaseException, model, analytic: bool, graph=None, forward: bool = False) -> ModelError:
    """A one-line ModelError for an exception raised while differentiating
    (``analytic``) or while evaluating the model near the point: the model-file
    line (the deepest frame in the file, else the first ``File "...", line N``
    of the model file in TensorFlow's message, which names the node's creation
    site for errors raised inside a traced graph) and the op that raised.

    While differentiating, the message also names the op whose gradient
    function raised (``ModelGraph.raising_gradient``: its type, name, what
    replaced its gradient, and the model-file line that created it), which is
    rarely the op that raised inside that function; with no model-file frame
    in the traceback, the line that leads the message is that op's.
    ``forward``: raised while taking a forward-mode product (JVP), which calls
    no gradient function: no search for one (on a large network the search
    tries the gradient of op after op, minutes for a message)."""
    import re
    import traceback

    from gradcli.model.core import first_line, where_raised
    from gradcli.model.paths import relative_path

    text = str(exc)
    op = getattr(getattr(exc, "op", None), "type", None)
    if op is None:
        found = re.search(r"\[Op:(\w+)\]", text) or re.search(r"node '?([\w/.-]+)", text)
        op = found.group(1).split("/")[-1] if found else None
    model_file = os.path.abspath(model.path)
    where = where_raised(exc, model.path)
    if not any(os.path.abspath(f.filename) == model_file for f in traceback.extract_tb(exc.__traceback__)):
        lines = [ln for f, ln in re.findall(r'File "([^"]+)", line (\d+)', text)
                 if os.path.abspath(f) == model_file]
        if lines:
            where = f"{relative_path(model.path)}:{lines[-1]}"
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", first_line(exc))
    message = re.sub(r"\s*\[Op:\w+\].*", "", message).strip().splitlines()
    doing = "computing the gradient" if analytic else "evaluating the model within a step of the point"
    if forward:
        doing = "computing forward mode (a JVP)"
    site = _raising_gradient(exc, model, graph) if analytic and not forward else None
    if site is not None:
        made = f", made at {site.location}" if site.location else ""
        op_name = f"op '{site.op_name}'" if site.op_name else "op"
        doing = f"computing the gradient of {op_name} ({site.description}{made})"
        if where == relative_path(model.path) and site.location:  # no line of its own
            where = site.location
    by = f" in op {op}" if op else ""
    return ModelError(
        f"{where}: {doing} raised {type(exc).__name__}{by}: {message[0] if message else ''}"
    )


def _raising_gradient(exc, model, graph):
    """``ModelGraph.raising_gradient``, tracing the model if no graph is given;
    None when that search itself fails (the message then names what it can)."""
    try:
        if graph is None:
            from gradcli.verdicts.culprit import ModelGraph

            graph = ModelGraph(model)
        return graph.raising_gradient(exc)
    except Exception:  # noqa: BLE001 - a bonus on an error message, never a second error
        return None


def nonfinite_analytic(model, input_name, output, analytic, fd, f0, x_shape, y_shape, tol, graph):
    """The analytic block (``[output size, input size]``) holds NaN or Inf at the
    point: what do finite differences see there? (module docstring, NaN rule)

    The one-sided ladder (``_ladder``) runs on up to COLUMNS_PER_BATCH columns
    with non-finite elements. An element is *smooth* when both one-sided slopes
    are finite, resolved (error estimate within ``compare.allowed_error`` of 0
    relative to ``Tolerance.resolve`` of the slope) and agree within
    ``compare.allowed_error``: the derivative exists, so a non-finite analytic
    value is a wrong gradient and the caller reports a ``mismatch`` with the
    returned explanation. Otherwise (slopes that disagree, are not finite or do
    not settle as the step shrinks) the point is a genuine singularity of the
    function and no derivative can be checked: ModelError (exit 3). Both name
    the op that produced the first non-finite value (``first_nonfinite``).
    """
    bad = ~np.isfinite(analytic)
    cols = np.flatnonzero(bad.any(axis=0))[:COLUMNS_PER_BATCH]
    left, right, left_err, right_err, *_ = _ladder(fd, input_name, output, f0, cols)
    sub = bad[:, cols]
    slope = np.maximum(np.abs(left), np.abs(right))
    with np.errstate(invalid="ignore"):
        settled = (
            np.isfinite(left) & np.isfinite(right)
            & (np.maximum(left_err, right_err) <= tol.atol + tol.resolve * slope)
        )
        agree = np.abs(left - right) <= compare.allowed_error(left, right, left_err + right_err, tol)
    smooth = sub & settled & agree
    singular = sub & ~smooth
    source = first_nonfinite(graph, input_name, output) if graph is not None else ""
    source = f"; the first non-finite value comes from {source}" if source else ""

    def element(mask):
        r, c = (int(i) for i in np.argwhere(mask)[0])
        return r, c, (
            f"{_label(output, compare._index(r, y_shape))} with respect to "
            f"{_label(input_name, compare._index(cols[c], x_shape))}"
        )

    if smooth.any():
        r, c, where = element(smooth)
        more = f"; {_count(int(singular.sum()), 'more element')} at a singularity" if singular.any() else ""
        return (
            f"the analytic derivative is not finite where the function is smooth: "
            f"{where} is {analytic[r, cols[c]]}, but the one-sided slopes agree "
            f"(left {left[r, c]:.7g}, right {right[r, c]:.7g}){source}{more}"
        )
    r, c, where = element(singular)
    if not (np.isfinite(left[r, c]) and np.isfinite(right[r, c])):
        seen = f"one-sided slopes left {left[r, c]:.4g}, right {right[r, c]:.4g}: not finite on a side"
    elif not settled[r, c]:
        seen = (
            f"the one-sided slopes do not settle as the step shrinks (left {left[r, c]:.4g}, "
            f"right {right[r, c]:.4g}): unbounded"
        )
    else:
        seen = f"one-sided slopes disagree (left {left[r, c]:.7g}, right {right[r, c]:.7g})"
    raise ModelError(
        f"{model.name}: the analytic derivative of {where} is {analytic[r, cols[c]]} at the "
        f"point, a genuine singularity of the function ({seen}){source}"
    )


def first_nonfinite(graph, input_name: str, output: str, at=None, gradient=True) -> str:
    """The op whose value is the first non-finite one, in graph order, when the
    model's forward ops and then (with ``gradient``) the gradient of ``output``
    with respect to ``input_name`` run at the point (``at``: other values of
    ``input_name``): "Op at file:line", or "" when the graph cannot tell (not
    traceable, control flow that cannot be fetched). Gradient ops are located by
    their own model-file line (a custom gradient's function) or else by the
    forward op they differentiate."""
    found = _first_nonfinite_op(graph, input_name, output, at, gradient)
    return "" if found is None else _describe_site(graph, *found)


def nonfinite_culprit(graph, pair) -> Culprit | None:
    """The culprit of a pair whose analytic derivative is NaN or Inf where the
    function is smooth: the op that makes the first non-finite value of the
    gradient (``first_nonfinite``), not the first op whose own gradient
    disagrees with differences (every op downstream of a NaN does)."""
    found = _first_nonfinite_op(graph, pair.input, pair.output)
    if found is None:
        return None
    op, forward_ops = found
    description = _describe_site(graph, op, forward_ops)
    target = op
    if op not in forward_ops:  # a gradient op: locate it by the forward op it differentiates
        name = op.name.split("/", 1)[-1].split("_grad/")[0]
        try:
            target = graph.graph.get_operation_by_name(name)
        except (KeyError, ValueError):
            target = op
    site = graph.site(target, f"{description.split(' at ')[0]}: first non-finite value of the gradient")
    return Culprit(
        site=site, definition="", analytic=float("nan"),
        numeric=float(pair.worst.numeric) if pair.worst is not None else float("nan"),
        rel_error=float("inf"), checked_ops=0, checked="first non-finite value",
    )


def _first_nonfinite_op(graph, input_name, output, at=None, gradient=True):
    """(op, forward ops) of ``first_nonfinite``, or None."""
    import re

    try:
        if not graph.trace():
            return None
        g = graph.graph
        import tensorflow as tf

        # tf.gradients puts its ops under "gradients/", "gradients_1/", ...
        forward = [op for op in g.get_operations() if not re.match(r"gradients(_\d+)?/", op.name)]
        backward = []
        if gradient:
            known = set(g.get_operations())
            with g.as_default():
                graph_gradients(graph.outputs[output], graph.inputs[input_name])
            backward = [op for op in g.get_operations() if op not in known]
        point = {**graph.model.point, **({input_name: at} if at is not None else {})}
        feeds = [graph.inputs[n] for n in point]
        feed_values = [tf.constant(point[n]) for n in point]
        fed = {t.ref() for t in feeds}
        known = set(forward)
        for ops in (forward, backward):
            tensors = [t for op in ops for t in op.outputs
                       if t.dtype.is_floating and t.ref() not in fed]
            if not tensors:
                continue
            values = graph.wrapped.prune(feeds, tensors)(*feed_values)
            for t, value in zip(tensors, values):
                if not np.all(np.isfinite(np.asarray(value))):
                    return t.op, known
    except Exception:  # graph analysis is a bonus: never lose the report
        return None
    return None


def _describe_site(graph, op, forward_ops) -> str:
    """``Op at file:line``; a gradient op names the forward op it differentiates."""
    model_file = os.path.abspath(graph.model.path)
    own = [f for f in op.traceback if os.path.abspath(f.filename) == model_file]
    if op in forward_ops or own:
        return f"{op.type} at {graph.location(op) or op.name}"
    # "gradients/<forward op name>_grad/...": the gradient of that op.
    name = op.name.split("/", 1)[-1].split("_grad/")[0]
    try:
        target = graph.graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return f"{op.type} (in the gradient)"
    return f"{op.type} in the gradient of {target.type} at {graph.location(target) or target.name}"


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return True


def _count(n, noun):
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _label(name, index):
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def kink_suspects(one_sided, output, shape, tol) -> np.ndarray | None:
    """Elements (``shape`` = [output size, input size]) whose one-sided slopes
    from the central-difference evaluations (``finite_diff.one_sided``) differ
    by more than ``compare.allowed_error`` with their error estimate: candidates
    for a kink that the central difference averages away (a tie of a max)."""
    if not one_sided:
        return None
    left, right, error = (one_sided[k][output].reshape(shape[1], -1).T for k in ("left", "right", "error"))
    with np.errstate(invalid="ignore"):
        return compare.comparable(left, right) & (
            np.abs(left - right) > compare.allowed_error(left, right, error, tol)
        )


class _Evidence:
    """What the traced graph shows on the path of one pair (``excuses``),
    computed once, when a diagnosis first needs it. Graph analysis that raises
    shows nothing (``None``): no excuse is then earned."""

    def __init__(self, graph, name, output):
        self.graph, self.name, self.output = graph, name, output
        self._found = {}

    def _get(self, key, fn):
        if key not in self._found:
            try:
                self._found[key] = fn(self.graph, self.name, self.output)
            except Exception:  # graph analysis failed: no evidence
                self._found[key] = None
        return self._found[key]

    @property
    def constructions(self):
        """Straight-through estimators on the path (``excuses.straight_through``)."""
        return self._get("constructions", excuses.straight_through)

    @property
    def nonsmooth(self):
        """Non-smooth ops on the path (``excuses.nonsmooth``)."""
        return self._get("nonsmooth", excuses.nonsmooth)


def refine(pair: PairResult, analytic, numeric, fd_error, fd, f0, x_shape, y_shape, tol,
           allow_surrogate=False, graph=None, suspects=None, others=None) -> PairResult:
    """Reclassify the failing elements of a ``mismatch`` pair, and look at the
    kink ``suspects`` of any pair (see module docstring).

    ``analytic``, ``numeric`` and ``fd_error`` are ``[output size, input size]``;
    ``fd`` the pair's ``FiniteDifferences`` (for ``evaluate``), ``f0`` the output
    at the point. ``graph`` (a ``culprit.ModelGraph``, or None) gives the
    evidence an excuse needs (``excuses``): a straight-through estimator for a
    ``surrogate``, a non-smooth op for a ``kink``; FakeQuant ops that the input
    reaches by several paths (``ModelGraph.surrogate_sites``) explain elements
    that are not locally constant themselves. ``suspects`` (``kink_suspects``)
    marks elements whose one-sided slopes at the default step disagree; of those
    that passed, at most SCAN_COLUMNS columns are examined on the ladder, and a
    kink is reported only where the ladder confirms it at the point.
    ``others`` (``tie_direction``): the analytic blocks of the other inputs,
    for ties across inputs.
    """
    a, n = analytic, numeric
    if pair.verdict == MISMATCH:
        bad = compare.outside(a, n, compare.allowed_error(a, n, fd_error, tol))
    elif pair.verdict in (PASS, ZERO) and suspects is not None and suspects.any():
        bad = np.zeros(a.shape, dtype=bool)  # a zero gradient at a kink is a kink too
    else:
        return pair
    was_zero = pair.verdict == ZERO
    evidence = _Evidence(graph, pair.input, pair.output)
    suspects = np.zeros_like(bad) if suspects is None else suspects & ~bad
    suspect_cols = np.flatnonzero(suspects.any(axis=0))
    scanned_all = len(suspect_cols) <= SCAN_COLUMNS
    suspects[:, suspect_cols[SCAN_COLUMNS:]] = False
    cols = np.flatnonzero((bad | suspects).any(axis=0))
    if not len(cols):
        return pair
    # Worst columns first; stop once a batch holds an element that is surely a
    # mismatch (the verdict is then mismatch whatever the rest are): a real bug
    # costs at most one batch of ladders. Columns not examined stay unexplained.
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bad, np.abs(a - n) / compare.allowed_error(a, n, fd_error, tol), 0.0)
    ratio = np.nan_to_num(ratio[:, cols], nan=np.inf).max(axis=0)
    cols = cols[np.argsort(-ratio, kind="stable")]
    shape = (a.shape[0], len(cols))
    left, right = np.full(shape, np.nan), np.full(shape, np.nan)
    left_err, right_err = np.full(shape, np.inf), np.full(shape, np.inf)
    constant = np.zeros(shape, dtype=bool)
    jump = np.zeros(shape, dtype=bool)
    ran = np.zeros(len(cols), dtype=bool)
    for start in range(0, len(cols), COLUMNS_PER_BATCH):
        part = slice(start, start + COLUMNS_PER_BATCH)
        found = _ladder(fd, pair.input, pair.output, f0, cols[part])
        for target, value in zip((left, right, left_err, right_err, constant, jump), found):
            target[:, part] = value
        ran[part] = True
        seen = slice(0, start + COLUMNS_PER_BATCH)
        if not constant[:, seen].any() and _unexplained_exists(
            a[:, cols[seen]], bad[:, cols[seen]], left[:, seen], right[:, seen],
            left_err[:, seen], right_err[:, seen], tol,
        ):
            break
    _deepen(fd, pair, f0, cols, ran, left, right, left_err, right_err, constant, tol, evidence, jump)
    sub_a = a[:, cols]
    sub_bad = bad[:, cols]
    examined = sub_bad | suspects[:, cols]
    gap, settled, between, agrees = slope_tests(sub_a, left, right, left_err, right_err, tol)
    gap &= examined & ~constant
    # f unchanged to the last bit at the smallest steps on both sides: both
    # slopes are exactly 0 there, with no round-off to resolve.
    settled |= constant
    # Jump rule: f(x +- h) - f(x) does not shrink with h (``_ladder``) AND a
    # non-smooth op on the path (a comparison, a select: a mask x != 0 at an
    # exact 0). No derivative exists there, so no value can be refuted or
    # confirmed: the element is a non-differentiability, named as a jump.
    jump &= examined & ran[None, :] & ~constant
    nonsmooth = evidence.nonsmooth if (gap.any() or jump.any()) else None
    jumped = jump if nonsmooth else np.zeros_like(jump)
    gap &= ~jumped
    # Kink rule: a gap AND a non-smooth op on the path. A gap without one (an
    # ill-conditioned smooth function) is never a kink.
    is_kink = gap if nonsmooth else np.zeros_like(gap)
    kink_ok = is_kink & between
    kink_bad = is_kink & ~between
    # Tie rule: kinks at elements that share their value with others are
    # tested along the direction that moves each group of tied values
    # together (``tie_direction``); the rows it refuses are no subgradient.
    tie_refused = tie_direction(fd, pair, f0, a, cols, is_kink, tol, others) if is_kink.any() else None
    if tie_refused is not None:
        kink_bad |= tie_refused
        kink_ok &= ~tie_refused
    if kink_bad.any():  # the evidence the layer pass's tie rule asks for
        pair.kinks_shared = shared_kinks(fd, pair, f0, cols, kink_bad, is_kink)
    # Both settled slopes agree with the analytic value at smaller steps: a pass
    # at a better step (a kink inside the default stencil but not at the point,
    # or a function that varies too fast for the default step). A function
    # locally constant there agrees only with an analytic value within atol of
    # 0 (a relu input just below zero, within the step); one that is not is
    # the surrogate rule's to judge.
    locally_constant = sub_bad & constant & (np.abs(sub_a) > tol.atol)
    resolved = sub_bad & ~locally_constant & ~gap & ~jumped & settled & agrees
    # Slopes that do not settle still bound the derivative by their error
    # estimates: where they agree with each other and the analytic value lies
    # outside both bands, it is refuted however coarse the resolution (16-bit
    # compute, whose one-sided slopes rarely settle to a tenth, against a
    # gradient 2x off): a mismatch, not inconclusive.
    refuted = sub_bad & ran[None, :] & ~locally_constant & ~gap & ~jumped & ~settled & _outside_both(
        sub_a, left, right, left_err, right_err, tol
    )
    # Slopes that do not settle, or a gap with no non-smooth op that the analytic
    # value lies within: finite differences cannot resolve the derivative here.
    unresolved = sub_bad & ran[None, :] & ~locally_constant & ~is_kink & ~jumped & ~resolved & ~refuted & (
        ~settled | (gap & between)
    )
    # Surrogate rule: locally constant, a non-zero analytic value, AND a
    # straight-through estimator on the path that explains the element.
    surrogate = np.zeros_like(locally_constant)
    unearned = np.zeros_like(locally_constant)  # a wrong gradient: a mismatch
    unshown = np.zeros_like(locally_constant)  # no graph to show either: inconclusive
    constructions, why_unearned = None, ""
    if locally_constant.any():
        constructions = evidence.constructions
        if constructions is None:
            unshown = locally_constant
        elif not constructions:
            unearned = locally_constant
            why_unearned = "no straight-through estimator is on the path"
        else:
            rows = np.flatnonzero(locally_constant.any(axis=1))
            beside = excuses.gradient_beside(graph, pair.input, pair.output, constructions, rows)
            if beside is None:
                unshown = locally_constant
            else:
                rest = np.zeros(sub_a.shape)
                rest[rows] = beside[:, cols]
                unearned = locally_constant & (np.abs(rest) > tol.atol + tol.rtol * np.abs(sub_a))
                surrogate = locally_constant & ~unearned
                why_unearned = (
                    "with the straight-through estimators held constant the gradient there is "
                    "still not zero: another op gives it"
                )
    unexplained = sub_bad & ~surrogate & ~kink_ok & ~kink_bad & ~jumped & ~resolved & ~unresolved & ~unshown
    if surrogate.any() and (unexplained & ~unearned).any() and graph is not None:
        sites = _safe_list(graph.surrogate_sites, pair.input, pair.output)
        if sites:
            pair.sites.extend(sites)
            pair.warnings.append(
                "the straight-through gradient reaches "
                f"{pair.input} by several paths ({'; '.join(s.description for s in sites)}): "
                "the extreme elements get the sum of them, and there the function is "
                "not constant either"
            )
            surrogate |= unexplained & ~unearned
            unexplained &= unearned

    kinks = kink_ok | kink_bad | jumped
    pair.n_kinks = int(kinks.sum())
    n_jumps = int(jumped.sum())
    if n_jumps:
        pair.warnings.append(
            f"{_count(n_jumps, 'element')} where the function jumps (a discontinuity: "
            f"|f(x +- h) - f(x)| does not shrink with the step, {_sites(nonsmooth)}): no derivative "
            "exists there, so finite differences can neither confirm nor refute the gradient"
        )
    pair.n_surrogate = int(surrogate.sum())
    pair.kinks = _kinks(kinks, kink_bad, left, right, sub_a, cols, y_shape, x_shape, tie_refused, jumped)
    if not scanned_all:
        pair.warnings.append(
            f"kink scan: {len(suspect_cols)} columns have one-sided slopes that disagree at the "
            f"default step; the first {SCAN_COLUMNS} were examined"
        )
    if resolved.any():
        where = evidence.nonsmooth
        if where:
            pair.warnings.append(
                f"{_count(int(resolved.sum()), 'element')} with a kink within the finite-difference "
                f"step but not at the point ({_sites(where)}): at smaller steps both one-sided "
                "slopes agree with the analytic value"
            )
        else:
            pair.warnings.append(
                f"{_count(int(resolved.sum()), 'element')} where the function varies too fast for "
                "the default step: at smaller steps both one-sided slopes agree with the analytic "
                "value"
            )
    failing = unexplained | kink_bad | unresolved | unshown
    full_failing = np.zeros_like(bad)
    full_failing[:, cols] = failing
    diff = np.abs(a - n)
    allowed = compare.allowed_error(a, n, fd_error, tol)
    pair.failing = compare._elements(a, n, diff, fd_error, full_failing, allowed, y_shape, x_shape)
    pair.n_failing = int(full_failing.sum())
    if unexplained.any():
        pair.verdict, pair.failed = MISMATCH, True
        extra = []
        if unearned.any():
            extra.append(
                f"{_count(int(unearned.sum()), 'element')} locally constant where the analytic "
                f"gradient is not, and {why_unearned}: not a surrogate"
            )
            culprit = _culprit(graph, pair, tol)
            if culprit is not None:
                pair.culprit = culprit
                site = culprit.site
                extra.append(
                    f"the op whose own gradient is wrong: {site.description} at "
                    f"{site.location or site.op_name}"
                )
        if pair.n_kinks:
            extra.append(f"{pair.n_kinks} more elements sit on kinks")
        if pair.n_surrogate:
            extra.append(f"{pair.n_surrogate} are locally constant")
        pair.explanation = EXPLANATIONS[MISMATCH] + (f" ({'; '.join(extra)})" if extra else "")
    elif kink_bad.any():
        pair.verdict, pair.failed = KINK, True
        outside = int((kink_bad & ~between).sum())
        pair.explanation = (
            f"{EXPLANATIONS[KINK]}, and the analytic value is not a valid subgradient at "
            f"{int(kink_bad.sum())} elements"
            + (f" ({outside} outside [left, right])" if outside else "")
            + (f" (tied elements moved together: {pair.n_tie_refused} output elements' derivatives "
               "disagree)" if pair.n_tie_refused else "")
            + f" ({_sites(nonsmooth)})"
        )
    elif (unresolved | unshown).any():
        pair.verdict, pair.failed = INCONCLUSIVE, True
        why = []
        if (unresolved & gap).any():
            why.append(
                f"at {_count(int((unresolved & gap).sum()), 'element')} the one-sided slopes "
                "disagree beyond their error estimates, but no op on the path is non-smooth: "
                "an ill-conditioned function, not a kink"
            )
        if (unresolved & ~gap).any():
            why.append(
                f"at {_count(int((unresolved & ~gap).sum()), 'element')} the one-sided slopes "
                "do not settle as the step shrinks"
            )
        if unshown.any():
            why.append(
                f"{_count(int(unshown.sum()), 'element')} locally constant where the analytic "
                "gradient is not, and the graph cannot show a straight-through estimator "
                "that explains it"
            )
        pair.explanation = f"{EXPLANATIONS[INCONCLUSIVE]} ({'; '.join(why)})"
    elif surrogate.any():
        pair.verdict, pair.failed = SURROGATE, not allow_surrogate
        pair.explanation = (
            f"{EXPLANATIONS[SURROGATE]} ({pair.n_surrogate} elements; the numeric derivative "
            f"is zero at every step from h/{2 ** (LADDER - SURROGATE_STEPS + 1)} to "
            f"h/{2 ** LADDER}; {'; '.join(c.site.description for c in constructions)})"
            + ("; allowed by --allow-surrogate" if allow_surrogate else "")
        )
        if pair.n_kinks:
            pair.explanation += f"; {pair.n_kinks} elements sit on kinks"
        pair.warnings.append(
            f"surrogate gradient: the function is locally constant at "
            f"{_count(pair.n_surrogate, 'element')} where the analytic gradient is not"
            + (" (allowed by --allow-surrogate)" if allow_surrogate else "")
        )
    elif kinks.any():
        pair.verdict, pair.failed = KINK, False
        n_kink = pair.n_kinks - n_jumps
        pair.explanation = "; ".join(
            ([f"{EXPLANATIONS[KINK]} at {n_kink} elements; the analytic value lies between them "
              "(a valid subgradient)"] if n_kink else [])
            + ([f"the function jumps at {_count(n_jumps, 'element')} (a discontinuity: no "
                "derivative exists)"] if n_jumps else [])
        ) + f": not a failure ({_sites(nonsmooth)})"
        if n_kink:
            pair.warnings.append(
                f"{_count(n_kink, 'element')} on a non-differentiability (kink): "
                "the analytic value is a subgradient there"
            )
    elif bad.any():  # every failing element resolved at smaller steps
        pair.verdict, pair.failed = PASS, False
        pair.explanation = EXPLANATIONS[PASS]
    # else: no suspect was a kink at the point; the verdict stands
    if was_zero and pair.verdict != ZERO:
        pair.resolution = None
        pair.warnings = [w for w in pair.warnings if " is zero (" not in w]
    return pair


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


def _outside_both(a, left, right, left_err, right_err, tol):
    """The analytic value farther from each finite one-sided slope than the
    element rule allows with that slope's error estimate."""
    with np.errstate(invalid="ignore"):
        return (
            np.isfinite(left) & np.isfinite(right)
            & (np.abs(a - left) > compare.allowed_error(a, left, left_err, tol))
            & (np.abs(a - right) > compare.allowed_error(a, right, right_err, tol))
        )


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


def _culprit(graph, pair, tol):
    """``ModelGraph.culprit`` for the pair, or None (graph analysis is a bonus here)."""
    if graph is None:
        return None
    try:
        return graph.culprit(pair.input, pair.output, tol)
    except Exception:
        return None


def _safe_list(fn, *args) -> list:
    try:
        return fn(*args) or []
    except Exception:  # graph analysis is a bonus: never lose the report
        return []


def _sites(sites) -> str:
    return "; ".join(s.description for s in sites[:3]) if sites else ""


def _unexplained_exists(a, bad, left, right, left_err, right_err, tol) -> bool:
    """Some failing element is surely a mismatch: its one-sided slopes settle,
    agree with each other, and not with the analytic value."""
    gap, settled, _, agrees = slope_tests(a, left, right, left_err, right_err, tol)
    return bool(np.any(bad & settled & ~gap & ~agrees))


def _deepen(fd, pair, f0, cols, ran, left, right, left_err, right_err, constant, tol, evidence,
            jump=None) -> None:
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
    with np.errstate(invalid="ignore"):
        unsettled = ran & (~_settled(left, right, left_err, right_err, tol) & ~constant).any(axis=0)
    where = np.flatnonzero(unsettled)
    if not len(where) or not evidence.nonsmooth:
        return
    found = _ladder(fd, pair.input, pair.output, f0, cols[where], levels=DEEP_LADDER)
    targets = (left, right, left_err, right_err, constant) + ((jump,) if jump is not None else ())
    for target, value in zip(targets, found):
        target[:, where] = value


def _ladder(fd, name, output, f0, cols, levels: int = LADDER):
    """One-sided slopes of ``output`` along unit vectors e_c (c in ``cols``).

    Returns left, right, their error estimates (``[output size, len(cols)]``),
    ``constant``: f unchanged at the SURROGATE_STEPS smallest steps on both sides,
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
    parts = {k: [] for k in ("left", "right", "left_err", "right_err", "constant", "jump")}
    for start in range(0, len(cols), COLUMNS_PER_BATCH):
        chunk = cols[start : start + COLUMNS_PER_BATCH]
        h0 = step_size(flat[chunk], dtype)
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
        ref = fp[-1]
        same = (
            (fp[-SURROGATE_STEPS:] == ref) & (fm[-SURROGATE_STEPS:] == ref)
            & (np.abs(ref - f0[None, :]) <= roundoff_ulps(dtype) * eps * np.abs(f0[None, :]))
        )
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
    return tuple(np.concatenate(parts[k], axis=1) for k in
                 ("left", "right", "left_err", "right_err", "constant", "jump"))


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
            output_index=compare._index(r, np.shape(f0)), input_index=[], analytic=float(along[r, 0]),
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
        f"the analytic derivative of {_count(len(rows), 'output element')} disagrees with the numeric "
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


def _kinks(kinks, kink_bad, left, right, a, cols, y_shape, x_shape, tie_refused=None, jumped=None) -> list[Kink]:
    rows, idx = np.nonzero(kinks)
    # Failures first, then by the width of the slope gap.
    order = sorted(range(len(rows)), key=lambda i: (
        not kink_bad[rows[i], idx[i]], -abs(right[rows[i], idx[i]] - left[rows[i], idx[i]])
    ))[:MAX_KINKS]
    return [
        Kink(
            output_index=compare._index(rows[i], y_shape),
            input_index=compare._index(cols[idx[i]], x_shape),
            left=float(left[rows[i], idx[i]]),
            right=float(right[rows[i], idx[i]]),
            analytic=float(a[rows[i], idx[i]]),
            subgradient=not bool(kink_bad[rows[i], idx[i]]),
            tie=tie_refused is not None and bool(tie_refused[rows[i], idx[i]]),
            jump=jumped is not None and bool(jumped[rows[i], idx[i]]),
        )
        for i in order
    ]


def explain(model, pairs, fd, graph, tol, options) -> None:
    """Add graph sites to disconnected/zero pairs, the culprit op to mismatches,
    and the Taylor test (every pair with ``options.taylor``, failing ones always)."""
    from gradcli.numerics import taylor

    for pair in pairs:
        if pair.input not in model.point:
            continue  # a joint pair (``check._JointCheck``): the layer table says where
        if pair.verdict in (DISCONNECTED, ZERO) and graph is not None:
            try:
                sites = graph.cut_sites(pair.input, pair.output)
                if not sites and pair.verdict == DISCONNECTED:
                    sites = graph.none_gradient_sites(pair.input, pair.output)
            except Exception:  # graph analysis is a bonus: never lose the report
                sites = []
            if sites:
                pair.sites.extend(sites)
                where = ", ".join(f"{s.description} at {s.location or s.op_name}" for s in sites)
                pair.explanation += f"; the path is cut by {where}"
                if not pair.failed:  # one warning that says where, instead of "does not reach"
                    pair.warnings = [
                        w for w in pair.warnings if "does not reach" not in w and "is zero" not in w
                    ]
                    pair.warnings.append(
                        f"{pair.input} reaches {pair.output} only through {where}: "
                        "nothing can be learned through it"
                    )
            elif pair.verdict == DISCONNECTED and graph.traced and not _safe(graph.reaches,
                pair.input, pair.output
            ):
                pair.explanation += f"; {pair.input} does not reach {pair.output} in the graph"
        if pair.failed and pair.verdict == MISMATCH and graph is not None and pair.culprit is None:
            try:
                if pair.worst is not None and not np.isfinite(pair.worst.analytic):
                    pair.culprit = nonfinite_culprit(graph, pair)
                if pair.culprit is None and not pair.reverse_failed and pair.forward_probe is not None:
                    pair.culprit = graph.forward_culprit(pair.input, pair.output, pair.forward_probe)
                if pair.culprit is None:
                    pair.culprit = graph.culprit(pair.input, pair.output, tol)
            except Exception as exc:  # graph analysis is a bonus: never lose the report
                pair.warnings.append(f"could not search for the culprit op ({type(exc).__name__})")
        if getattr(options, "taylor", False) or (pair.failed and pair.verdict in (MISMATCH, KINK)):
            pair.taylor = taylor.taylor_test(model, fd, pair.input, pair.output, options.rng_seed)
