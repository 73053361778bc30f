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

Along the directions that move the matrix symmetrically (E_ij + E_ji where
the input is the matrix), both sides are the same derivative. Derivatives are
linear in the direction, so along a unit direction d the numeric and
analytic derivatives are the blocks times d, and the error estimate at most
the error estimates times |d| (no evaluation is added).

Rule (``symmetric_pass``): a mismatch pair whose every path passes through an
op of ``SYMMETRIC_INPUT_OPS`` given a symmetric matrix at the point (the evidence,
from the traced graph; a matrix that is not symmetric is outside the op's
contract, and its gradient is then wrong for the input it is given) is compared
again by the element rule (``compare.compare_block``) along an orthonormal
basis of the directions of its input that move every such matrix
symmetrically (``symmetric_directions``: an input reshaped, transposed or
scaled into the matrix has the preimage of the symmetric matrices; the
culprit search named the ``Reshape`` then). When every one agrees, the pair
passes, and a warning says what was compared and why; else the mismatch
stands and is refined as any other. Second derivatives (``analyses.second_order``)
are compared the same way, both routes along the same directions.

Where the input also reaches the output around the op (``logdet(A) +
tr(A)``, a Gaussian log-density with ``inv(S)`` beside ``logdet(S)``), its
antisymmetric directions define a derivative (a rule wrong only there,
<W^T, S> = <W, S> along symmetric S, must fail), so no direction is
excused: every element is compared against the analytic block with the
op's part taken as the derivative of what the op computes from the lower
triangle it reads (``lower_triangle_correction``). Second derivatives
differentiate the gradient, so they search the paths to it (``path_ends``):
a second path whose gradient does not depend on the input (a linear term)
adds nothing to them, and where one does, the correction is taken for the
gradient's elements.
An op's own check (``local_check``)
probes such an op along symmetric directions too (``symmetric_direction``),
so it is never the culprit of another's bug.

``tf.linalg.eigh`` reads one triangle as well, but its gradient is that
triangle's (lower-triangular): it agrees element by element and needs no
rule (measured: ``eigh`` of a raw 3x3 input passes).
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics.autodiff import graph_gradients
from gradcli.verdicts.graph_ops import carries
from gradcli.results import EXPLANATIONS, PASS
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts import compare
from gradcli.verdicts.diagnosis import Diagnosis
from gradcli.verdicts.phrases import count, site_list

#: Op type -> the call that makes it: ops that read their input as a
#: symmetric matrix and whose gradient is the symmetric one.
SYMMETRIC_INPUT_OPS = {"Cholesky": "tf.linalg.cholesky"}
#: The op's contract holds where its matrix at the point is symmetric to
#: this many ulps of its largest entry (a product m m^T, or a sum of such,
#: is symmetric to round-off). A matrix that is not symmetric is an input
#: the op does not compute on as its gradient assumes: no excuse, and its
#: gradient is wrong for the input it is given (HIPS/autograd#56,
#: ``bench/real_bugs/cholesky_lower_triangle.py``).
SYMMETRY_ULPS = 64
#: The rule takes the map from an input to such an op's matrix as a dense
#: Jacobian (one VJP per pair of off-diagonal entries) and its null space by
#: SVD: up to this many elements of the input, and of the matrices (a 64 x 64
#: covariance). Beyond, no excuse is tried and the element rule stands.
MAX_ELEMENTS = 4096


def path_ends(graph, outputs: list[str], gradient_of: str | None = None, cotangents: dict | None = None) -> list:
    """The tensors whose paths from an input the rule searches: the model's
    ``outputs``; or, for second derivatives, the gradient by input
    ``gradient_of`` of f = sum of <c_o, o> over ``cotangents`` (the scalar a
    second-order check differentiates; all ones when not given), built in
    the traced graph: a second path whose gradient does not depend on the
    input (a trace penalty, any linear term) adds nothing to it."""
    if graph is None or not graph.trace():
        return []  # no trace: no paths, no evidence
    if gradient_of is None:
        return [graph.outputs[o] for o in outputs]
    tf = import_tensorflow()
    names = [o for o in outputs if graph.outputs[o].dtype.is_floating]
    with graph.graph.as_default():
        ys = [graph.outputs[o] for o in names]
        seeds = [tf.constant(np.asarray(cotangents[o]), y.dtype) if cotangents and o in cotangents
                 else tf.ones_like(y) for o, y in zip(names, ys)]
        return [g for g in graph_gradients(ys, [graph.inputs[gradient_of]], grad_ys=seeds) if g is not None]


def readers_on_paths(graph, name: str, ends: list) -> tuple[list, bool]:
    """The ops of ``SYMMETRIC_INPUT_OPS`` on the paths from ``name`` to the
    tensors ``ends`` (``path_ends``), and whether some path arrives around
    them (no such op reads it: there ``name``'s antisymmetric directions
    define a derivative the rule must not excuse, a gradient wrong only
    there, <W^T, S> = <W, S> along symmetric S). Paths run along tensors that
    carry a derivative (``carries``: floating or complex; a shape read
    carries none)."""
    end_ops = {t.op for t in ends}
    if not end_ops:
        return [], False
    on_paths = graph.ops_between(name, ends)
    readers = [op for op in graph.graph.get_operations() if op in on_paths and op.type in SYMMETRIC_INPUT_OPS]
    if not readers:
        return [], False
    reached, stack = set(), [graph.inputs[name].op]
    while stack:  # along the paths, stopping at the readers: does any other path arrive?
        op = stack.pop()
        if op in end_ops:
            return readers, True
        for consumer in (c for t in op.outputs if carries(t) for c in t.consumers()):
            if consumer in on_paths and consumer not in reached and consumer.type not in SYMMETRIC_INPUT_OPS:
                reached.add(consumer)
                stack.append(consumer)
    return readers, False


def symmetric_readers(graph, name: str, ends: list) -> list:
    """``readers_on_paths`` when every path passes through a reader; else []."""
    readers, around = readers_on_paths(graph, name, ends)
    return [] if around else readers


def is_symmetric(value) -> bool:
    """Whether ``value`` is square in its last two axes and symmetric there
    to ``SYMMETRY_ULPS`` ulps of its largest entry."""
    value = np.asarray(value)
    if value.ndim < 2 or value.shape[-1] != value.shape[-2] or not np.issubdtype(value.dtype, np.floating):
        return False
    scale = float(np.max(np.abs(value), initial=0.0))
    gap = float(np.max(np.abs(value - np.swapaxes(value, -1, -2)), initial=0.0))
    return gap <= SYMMETRY_ULPS * np.finfo(value.dtype).eps * scale


def read_matrices(graph, readers) -> tuple | None:
    """``(feeds, values, matrices)``: the model's inputs, their values at the
    point, and the matrix each of ``readers`` reads there; None when one is
    outside the rule (not symmetric at the point, ``is_symmetric``, or more
    than ``MAX_ELEMENTS``), where its gradient is wrong for what it is given."""
    feeds, values, _ = graph.seen_values([])
    matrices = [graph.prune(feeds, [op.inputs[0]])(*values)[0] for op in readers]
    if not all(is_symmetric(m) and int(np.size(m)) <= MAX_ELEMENTS for m in matrices):
        return None
    return feeds, values, matrices


def symmetric_direction(u: np.ndarray) -> np.ndarray:
    """``u`` made symmetric in its last two axes, (u + u^T) / 2: a direction
    an op of ``SYMMETRIC_INPUT_OPS`` is defined along."""
    return (u + np.swapaxes(u, -1, -2)) / 2


def symmetric_directions(graph, name: str, ops) -> np.ndarray | None:
    """An orthonormal basis ``[input size, k]`` of the directions of input
    ``name`` along which the matrix each of ``ops`` reads moves symmetrically
    (its antisymmetric part stays 0, to first order); None when there is
    none to take (no antisymmetric direction, a matrix that is not square,
    more than ``MAX_ELEMENTS``, a matrix not symmetric at the point:
    ``is_symmetric``).

    Rule: each pair of off-diagonal entries (i < j) of each matrix C gives
    one row d(C_ij - C_ji)/dx (a VJP of the traced graph with the seed E_ij
    - E_ji); the basis is the null space of those rows, by SVD, whose rank
    counts singular values above ``max(shape) * eps * largest``
    (``numpy.linalg.matrix_rank``'s rule). An input that is the matrix has
    the symmetric matrices for its null space; one reshaped, transposed or
    scaled into it has their preimage."""
    tf = import_tensorflow()
    size = int(np.size(graph.model.point[name]))
    if size > MAX_ELEMENTS:
        return None
    read = read_matrices(graph, ops)
    if read is None:
        return None
    feeds, values, matrices = read
    rows = []
    for op, at_point in zip(ops, matrices):
        matrix, shape = op.inputs[0], tuple(at_point.shape)
        with graph.graph.as_default():
            seed = tf.compat.v1.placeholder(matrix.dtype, shape)
            (gradient,) = graph_gradients([matrix], [graph.inputs[name]], grad_ys=[seed])
        if gradient is None:
            continue  # the input does not reach this matrix
        vjp = graph.prune(feeds + [seed], [gradient])
        m, batch = shape[-1], int(np.prod(shape[:-2], dtype=np.int64))
        for b in range(batch):
            for i, j in zip(*np.triu_indices(m, 1)):
                antisymmetric = np.zeros((batch, m, m))
                antisymmetric[b, i, j], antisymmetric[b, j, i] = 1.0, -1.0
                (row,) = vjp(*values, tf.constant(antisymmetric.reshape(shape), matrix.dtype))
                rows.append(np.asarray(row, np.float64).ravel())
    if not rows:
        return None
    constraints = np.stack(rows)
    _, singular, right = np.linalg.svd(constraints, full_matrices=True)
    rank = int(np.sum(singular > max(constraints.shape) * np.finfo(np.float64).eps * singular.max(initial=0.0)))
    if rank == 0:
        return None  # every direction moves the matrices symmetrically: nothing to excuse
    return right[rank:].T


def lower_triangle_correction(graph, name: str, end, readers, rows: int) -> np.ndarray | None:
    """``[rows, input size]``: what finite differences see of each reader's
    part of the derivative of tensor ``end`` (``path_ends``: an output, or a
    gradient for second derivatives) by ``name``, less TensorFlow's
    gradient there, row by output element; None when there is nothing to
    take (a matrix not symmetric at the point or not real, more than
    ``MAX_ELEMENTS`` on either side, a reader on another's path).

    Rule: with G the reader's gradient (TensorFlow's, symmetric) for one
    output element's unit cotangent, the derivative of what the op computes,
    from the lower triangle it reads, is 2 G_ij below the diagonal, G_ii on
    it and 0 above; its input's part is that difference carried back to
    ``name`` (a VJP of the traced graph from the matrix). Derivatives of the
    other paths are TensorFlow's, unchanged: checked element by element."""
    tf = import_tensorflow()
    x, y = graph.inputs[name], end
    if not y.dtype.is_floating or int(np.size(graph.model.point[name])) > MAX_ELEMENTS or rows > MAX_ELEMENTS:
        return None
    if any(a is not b and graph.depends_on(b.inputs[0].op, {a}) for a in readers for b in readers):
        return None  # a reader after another: each one's convention reaches the other's part
    read = read_matrices(graph, readers)
    if read is None:
        return None
    feeds, values, _ = read
    with graph.graph.as_default():
        seed = tf.compat.v1.placeholder(y.dtype, y.shape)
        correction = None
        for op in readers:
            matrix, factor = op.inputs[0], op.outputs[0]
            (upstream,) = graph_gradients([y], [factor], grad_ys=[seed])
            if upstream is None:
                continue
            (symmetric,) = graph_gradients([factor], [matrix], grad_ys=[upstream])
            read = 2.0 * tf.linalg.band_part(symmetric, -1, 0) - tf.linalg.diag(tf.linalg.diag_part(symmetric))
            (part,) = graph_gradients([matrix], [x], grad_ys=[read - symmetric])
            if part is not None:
                correction = part if correction is None else correction + part
    if correction is None:
        return None
    run = graph.prune(feeds + [seed], [correction])
    unit = np.zeros(rows)
    taken = []
    for k in range(rows):
        unit[:] = 0.0
        unit[k] = 1.0
        (row,) = run(*values, tf.constant(unit.reshape(y.shape), y.dtype))
        taken.append(np.asarray(row, np.float64).ravel())
    return np.stack(taken)


def symmetric_pass(pair, analytic, numeric, fd_error, y_shape, tol, graph, gradient_of=None,
                   cotangents=None) -> Diagnosis | None:
    """The rule of the module docstring: a passing ``Diagnosis`` for a
    mismatch ``pair`` whose input reaches the matrix an op of
    ``SYMMETRIC_INPUT_OPS`` reads; None otherwise.

    * Every path from the input passes through such an op: compared along
      every direction of its input that moves the matrix symmetrically
      (``symmetric_directions``).
    * Some path arrives around it: every element is compared, with the op's
      part of the analytic block taken as the derivative of what it computes
      (``lower_triangle_correction``).

    ``analytic`` may be a list of blocks, every one of which must agree (the
    two routes to a second derivative). It (or each route), ``numeric`` and
    ``fd_error`` are ``[output size, input size]``; along a unit direction d
    the derivatives are ``block @ d`` and the error estimate at most
    ``|fd_error| @ |d|``. A second derivative's pair is of a gradient:
    ``gradient_of`` names the input it is by and ``cotangents`` the scalar
    (``path_ends``). On a pass the pair's figures become those compared (the
    worst route's)."""
    routes = analytic if isinstance(analytic, (list, tuple)) else [analytic]
    try:
        outputs = list(cotangents) if gradient_of is not None else [pair.output]
        ends = path_ends(graph, outputs, gradient_of, cotangents)
        readers, around = readers_on_paths(graph, pair.input, ends)
        if not readers:
            return None
        if around:
            if len(ends) != 1:
                return None
            correction = lower_triangle_correction(graph, pair.input, ends[0], readers, np.shape(routes[0])[0])
            if correction is None:
                return None
            x_shape = tuple(np.shape(graph.model.point[pair.input]))
            compared = [compare.compare_block(pair.input, pair.output, block + correction, numeric, fd_error,
                                              y_shape, x_shape, tol) for block in routes]
        else:
            basis = symmetric_directions(graph, pair.input, readers)
            if basis is None:
                return None
            k = basis.shape[1]
            compared = [compare.compare_block(pair.input, pair.output, block @ basis, numeric @ basis,
                                              np.abs(fd_error) @ np.abs(basis), y_shape, (k,), tol)
                        for block in routes]
    except Exception:  # noqa: BLE001 - graph analysis is a bonus: no evidence, no excuse
        return None
    if any(again.verdict != PASS for again in compared):
        return None
    again = max(compared, key=lambda result: result.max_rel_error)
    pair.max_abs_error, pair.max_rel_error = again.max_abs_error, again.max_rel_error
    pair.fd_error, pair.compared = again.fd_error, again.compared
    pair.worst, pair.failing, pair.n_failing = None, [], 0
    sites = [graph.site(op, f"{op.type} ({SYMMETRIC_INPUT_OPS[op.type]}) at {graph.location(op) or op.name}")
             for op in readers]
    read = f"{pair.input} reaches a matrix read as symmetric by {site_list(sites)}: TensorFlow's gradient there is the symmetric one"
    if around:
        return Diagnosis(PASS, False, EXPLANATIONS[PASS] + " with each such op's part as it reads its matrix", warnings=[
            f"{read}, and {pair.input} reaches {pair.output} by another path too, so every element was "
            "compared with each such op's part of the gradient taken as the derivative of what it computes "
            "from the lower triangle it reads (2 G_ij below the diagonal, 0 above), where it agrees with "
            "finite differences; the gradient returned holds the symmetric convention there",
        ])
    return Diagnosis(PASS, False, EXPLANATIONS[PASS] + " along symmetric directions", warnings=[
        f"{read}, so it was compared along the "
        f"{count(k, 'direction')} of {pair.input} that move that matrix symmetrically (E_ij + E_ji "
        f"where {pair.input} is the matrix), where it agrees with finite differences; along one "
        "that moves it asymmetrically (one off-diagonal entry alone) it is not the derivative, "
        "by that convention",
    ])
