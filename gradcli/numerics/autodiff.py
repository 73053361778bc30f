"""Analytic derivatives: the one place that holds tapes and accumulators.

Every function takes ``function`` (dict of tensors -> dict of output tensors)
and ``point`` (dict of arrays) and returns numpy arrays. ``None`` stands for
"TensorFlow returned no gradient" (disconnected), never for zero.

Shape rule: a reverse-mode gradient must have exactly its input's shape.
TensorFlow does not check this for gradient functions (registered or
``tf.custom_gradient``): a scalar returned for a per-channel parameter, or a
``(1, 3)`` gradient for a ``(3,)`` input, flows on and is broadcast or fails
later (an optimizer's update of the variable). ``jacobians`` gives such an
input a ``WrongShape`` (the two shapes) in place of its block, for
that input alone: the other inputs keep their blocks and are checked. ``vjp``
returns gradients as TensorFlow gave them; ``checked_gradient`` applies the
rule to one. Equal element counts are no excuse (a ``(1, 3)`` for ``(3,)`` is
reported).

Forward mode on two threads: TensorFlow's forward mode computes every op's
JVP through module-level ``tf.function`` helpers (``forwardprop``'s), whose
caches grow when a new op type or shape is met and are not safe to grow from
one thread while another looks them up. The joint check runs on a thread
beside the layer pass (``analyses.check.beside``), and both take
forward-mode products: on an EfficientNet-B0 the joint check's JVP raised
"OrderedDict mutated during iteration" about one run in two. Every
accumulator of this process is opened through ``forward_accumulator``, in
``jvp_functions.kept()``, which holds ``jvp_functions.CACHE_LOCK`` wherever
those caches are met (a JVP function looked up or traced by TensorFlow), and
not while a JVP function it keeps runs: the two threads' products run beside
each other.

Forward mode eagerly and traced (``traced_jvp``). TensorFlow's forward mode
transposes the gradient registered for each op's *type*, in eager execution
and in a graph alike (``forwardprop._jvp_helper`` calls
``record_gradient(op_type, ...)``: a ``gradient_override_map`` changes neither),
and a ``tf.function`` called under an accumulator, eagerly or from a trace,
gets its JVP from its gradient (a custom gradient's rule transposed). The one
op whose forward mode depends on where the accumulator runs is a
``tf.custom_gradient`` (``custom_gradient._eager_mode_decorator`` against
``_graph_mode_decorator``): eagerly its forward ops are recorded and then its
rule (``record_operation``), which fills in a tangent only where the forward
ops left the result without one (a ``stop_gradient``, a ``numpy_function``, a
round trip through integers: the rule, transposed); in a graph its results pass
through an ``IdentityN`` whose JVP (by type: the identity) gives every result a
tangent, zero where none arrived, so the rule is never used. Measured (TF
2.21) for s(x) = stop_gradient(x^2) with the rule 2x dy: 2x u eagerly, 0
inside a ``tf.function``; with the value recorded, 2x u both ways. So the two
ways can differ only where the traced function holds a custom gradient.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
from gradcli.numerics import jvp_functions
from gradcli.numerics.jvp_functions import functions_run_eagerly  # noqa: F401 - its callers' seam
from gradcli.numerics.held import tensor_of, tensors_of
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()


def fresh(values):
    """``values`` (a dict or a list of tensors) as tensors no earlier call has
    seen: a copy of each (eagerly or inside a trace), a ``tf.Variable`` left as
    it is (its reads are new tensors, and a custom gradient must see a variable).

    Every call of a model that is differentiated (``sources_of``: every tape
    and accumulator of this module) or evaluated for a finite difference
    (``numerics.evaluators``) gets its inputs from here, every input, not only
    those differentiated. Libraries cache results by the input tensor object:
    a TensorFlow Probability bijector returns ``forward(x)`` from its cache
    when called again with the same ``x``. Called first for the output shapes
    and then under a tape with the same tensors, the cached output has no
    path to the watched input, and the gradient comes back disconnected
    (None); one cached from a call under another tape would carry that
    tape's path, not this one's. A fresh copy is a new key: the library
    computes again, on this tape. Plain tensors and arrays (a held array as
    its tensor, ``numerics.held``) are copied by one ``IdentityN`` (a Whisper's
    check: 675 calls of 52 inputs, 1.7 s of 16 s one op each; 50 inputs 67 us
    against 1.35 ms), other values (sparse, ragged) by ``tf.identity``."""
    items = list(values.items()) if isinstance(values, dict) else list(enumerate(values))
    copies = dict(items)
    plain = [k for k, v in items if isinstance(v, (tf.Tensor, np.ndarray, np.generic))]
    if plain:
        copies.update(zip(plain, tf.raw_ops.IdentityN(input=[tensor_of(copies[k]) for k in plain])))
    for k, v in items:
        if not isinstance(v, (tf.Tensor, np.ndarray, np.generic, tf.Variable)):
            copies[k] = tf.identity(v)
    return copies if isinstance(values, dict) else [copies[i] for i, _ in items]


# -- the seam: every form TensorFlow's derivatives come back in, made one ------


def dense(gradient):
    """One form for a derivative as TensorFlow returns it, eagerly or in a graph.

    ``None`` (disconnected) stays None. ``tf.IndexedSlices`` (a ``tf.gather``'s
    or an embedding's gradient) becomes the dense tensor it stands for, rows of
    repeated indices summed. A ``tf.SparseTensor`` becomes its dense form. A
    resource variable's value is read. Anything else is returned as it is.
    """
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    if isinstance(gradient, tf.SparseTensor):
        return tf.sparse.to_dense(gradient)
    if isinstance(gradient, tf.Variable):
        return tf.convert_to_tensor(gradient)
    return gradient


def to_numpy(gradient):
    """``dense`` as a numpy array (None stays None)."""
    gradient = dense(gradient)
    return None if gradient is None else np.asarray(gradient)


def reverse(tape, targets, sources, output_gradients=None, zeros: bool = False) -> list:
    """``tape.gradient`` of ``targets`` with respect to ``sources``, each result
    through ``dense`` (a list for a list of sources, else one). ``zeros``:
    disconnected sources get zeros rather than None. Every reverse-mode product
    of a tape in gradcli is taken here."""
    grads = tape.gradient(
        targets, sources, output_gradients=output_gradients,
        unconnected_gradients=tf.UnconnectedGradients.ZERO if zeros else tf.UnconnectedGradients.NONE,
    )
    if not isinstance(sources, (list, tuple)):
        return dense(grads)
    return [dense(g) for g in grads]


def graph_gradients(ys, xs, grad_ys=None, stop_gradients=None, unconnected: str = "none") -> list:
    """``tf.gradients`` in the current graph, each result through ``dense``:
    the graph-mode twin of ``reverse`` (culprit search, precision rule)."""
    grads = tf.gradients(
        ys, xs, grad_ys=grad_ys, stop_gradients=stop_gradients, unconnected_gradients=unconnected
    )
    return [dense(g) for g in grads]


def forward(accumulator, y, zeros: bool = False):
    """``accumulator.jvp(y)`` through ``dense``: TensorFlow's forward mode
    transposes each op's gradient, so a JVP comes back in the form a gradient
    does (``tf.IndexedSlices`` after ``tf.math.unsorted_segment_sum`` or
    ``keras.ops.segment_sum``, whose gradient is a gather). ``zeros``: an
    output the tangents do not reach gets zeros rather than None. Every
    forward-mode product of an accumulator in gradcli is taken here."""
    return dense(accumulator.jvp(
        y, unconnected_gradients=tf.UnconnectedGradients.ZERO if zeros else tf.UnconnectedGradients.NONE,
    ))


@contextlib.contextmanager
def forward_accumulator(primals, tangents):
    """``tf.autodiff.ForwardAccumulator``, entered in ``jvp_functions.kept()``
    (module docstring). Use as ``with forward_accumulator(p, t) as acc``."""
    with jvp_functions.kept():
        with tf.autodiff.ForwardAccumulator(primals, tangents) as accumulator:
            yield accumulator


def sources_of(function: Callable, values: dict, wrt: list[str]) -> tuple[dict, list]:
    """What a reverse pass watches for ``wrt``, and the values to call
    ``function`` with.

    A weight the user's code holds as a ``tf.Variable`` (``function.variables``,
    set by ``model.variables``) is differentiated as a variable: a fresh
    trainable ``tf.Variable`` holding the point's value takes its place in the
    call, so a ``tf.custom_gradient`` that reads it sees a variable and calls its
    gradient function with ``variables=``, as in the user's training step (a
    plain tensor in its place would call the gradient function without them).
    Every other input is a fresh copy (``fresh``): the call never sees a
    tensor an earlier call saw, so a library's cache cannot hand it the
    earlier call's outputs, and the copies of ``wrt`` are what is watched.
    """
    held = getattr(function, "variables", ())
    call_values = fresh(values)
    for n in wrt:
        if n in held and not isinstance(values[n], tf.Variable):  # a variable given is that variable
            call_values[n] = held_variable(n, values[n])
    return call_values, [call_values[n] for n in wrt]


def held_variable(name: str, value):
    """The fresh trainable ``tf.Variable`` that stands for the weight ``name`` in a call (``sources_of``)."""
    return tf.Variable(value, trainable=True, name=name.replace("/", "_"))


@dataclass(frozen=True)
class WrongShape:
    """A gradient whose shape is not its input's (module docstring, shape rule):
    stands in for the gradient (or Jacobian block) of that input."""

    expected: tuple  # the input's shape
    got: tuple  # the shape of the gradient TensorFlow returned

    def __str__(self) -> str:
        return f"a gradient of shape {_shape(self.got)} for an input of shape {_shape(self.expected)}"


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def checked_gradient(gradient, shape):
    """``gradient`` as an array of ``shape`` exactly, None if None, else ``WrongShape``."""
    if gradient is None:
        return None
    array = np.asarray(gradient)
    if array.shape != tuple(shape):
        return WrongShape(expected=tuple(shape), got=array.shape)
    return array


def vjp(function: Callable, point: dict, wrt: list[str], cotangents: dict) -> dict:
    """J^T c summed over outputs: ``GradientTape.gradient(output_gradients=c)``.

    ``cotangents`` maps output name -> seed; outputs without one are left out of
    the sum (a zero seed). Returns input name -> array (in the shape TensorFlow
    gave it: see ``checked_gradient``), or None where disconnected.
    """
    return vjps(function, point, wrt, [cotangents])[0]


def vjps(function: Callable, point: dict, wrt: list[str], seeds: list[dict]) -> list[dict]:
    """``vjp`` for each of several cotangents, from one forward pass (a
    persistent tape, one backward pass per seed)."""
    products = vjp_tensors(function, tensors_of(point), wrt, seeds)
    return [{n: to_numpy(g) for n, g in zip(wrt, grads)} for grads in products]


def vjp_tensors(function: Callable, values: dict, wrt: list[str], seeds: list[dict]) -> list[list]:
    """The tensors of ``vjps`` (None where disconnected), eagerly or inside a
    trace (``Program``): one forward pass on a persistent tape, one backward
    pass per seed."""
    values, sources = sources_of(function, values, wrt)
    with tf.GradientTape(persistent=len(seeds) > 1) as tape:
        tape.watch(sources)
        outputs = function(values)
    products = []
    for cotangents in seeds:
        names = list(cotangents)
        products.append(reverse(
            tape, [outputs[o] for o in names], sources,
            output_gradients=[tf.cast(cotangents[o], outputs[o].dtype) for o in names],
        ))
    return products


#: Jacobians of outputs of up to this many elements take their rows as eager
#: VJPs on one tape (see ``_reverse``).
EAGER_MAX_ROWS = 32


def jvp(function: Callable, point: dict, tangents: dict, outputs: list[str] | None = None) -> dict:
    """J t for every output (or those named), by forward mode
    (``tf.autodiff.ForwardAccumulator``). Outputs the tangents do not reach get zeros.

    TensorFlow's forward mode cannot enter some traced functions (a
    ``tf.function`` holding a while loop raises on its variant accumulators):
    then the JVP is taken with the functions' bodies run eagerly, the same
    ops, so forward mode is still checked; a failure there raises.
    """
    try:
        return _jvp(function, point, tangents, outputs)
    except Exception:  # noqa: BLE001 - TensorFlow raises many types here
        if tf.config.functions_run_eagerly():
            raise
    with functions_run_eagerly():
        return _jvp(function, point, tangents, outputs)


def _jvp(function, point, tangents, outputs):
    return {o: np.asarray(t) for o, t in jvp_tensors(function, tensors_of(point), tangents, outputs).items()}


def jvp_tensors(function: Callable, values: dict, tangents: dict, outputs: list[str] | None = None) -> dict:
    """The tensors of ``jvp``, eagerly or inside a trace (``Program``): zeros
    of the output's shape and dtype where no tangent arrives."""
    names = list(tangents)
    values, primals = sources_of(function, values, names)
    with forward_accumulator(primals, [tf.cast(tangents[n], primals[i].dtype) for i, n in enumerate(names)]) as acc:
        results = function(values)
    result = {}
    for o, y in results.items():
        if outputs is not None and o not in outputs:
            continue
        t = forward(acc, y) if y.dtype.is_floating else None
        result[o] = tf.zeros_like(y) if t is None else t
    return result


def forward_reaches(function: Callable, point: dict, name: str, output: str) -> bool:
    """Whether forward mode carries a tangent of input ``name`` to ``output``
    at all (``ForwardAccumulator.jvp`` is not None). TensorFlow's forward mode
    transposes each op's gradient function, so an op whose gradient has no
    gradient itself (``ResizeBilinearGrad``) stops every tangent there: the
    JVP comes back as None, which ``jvp`` gives as zeros."""
    values, primals = sources_of(function, tensors_of(point), [name])
    tangent = tf.ones_like(primals[0])
    with forward_accumulator(primals, [tangent]) as acc:
        y = function(values)[output]
    return forward(acc, y) is not None


@dataclass
class Jacobians:
    """``blocks[(output, input)]``: array of shape ``output.shape + input.shape``
    (None where disconnected, ``WrongShape`` where the input's gradient has
    another shape than the input); ``mode`` "reverse" or "forward"; ``passes`` the
    number of vectorised VJP/JVP passes, i.e. output or input elements."""

    blocks: dict
    mode: str
    passes: int
    note: str = ""  # why the mode differs from the one chosen by size, if it does


def choose_mode(output_size: int, input_size: int) -> str:
    """Reverse mode needs one pass per output element, forward one per input
    element: take the smaller (ties go to reverse, TensorFlow's native mode)."""
    return "reverse" if output_size <= input_size else "forward"


def jacobians(
    function: Callable, point: dict, wrt: list[str], outputs: list[str], mode: str = "auto"
) -> Jacobians:
    """Full Jacobian blocks of ``outputs`` with respect to ``wrt``, vectorised with pfor."""
    values = tensors_of(point)
    in_size = sum(int(np.size(point[n])) for n in wrt)
    if mode == "auto":
        shapes = {o: tuple(v.shape) for o, v in function(fresh(values)).items()}
        out_size = sum(int(np.prod(shapes[o], dtype=np.int64)) for o in outputs)
        mode = choose_mode(out_size, in_size)
        if mode == "forward":
            blocks = _forward(function, values, wrt, outputs)
            if _agrees_with_reverse(function, point, wrt, outputs, blocks):
                return Jacobians(blocks=blocks, mode=mode, passes=in_size)
            blocks, passes, _ = _reverse(function, values, wrt, outputs)
            return Jacobians(
                blocks=blocks, mode="reverse", passes=passes,
                note="forward mode disagrees with reverse mode here (TensorFlow's forward "
                "mode differentiates a tf.custom_gradient's forward ops, reverse mode calls its "
                "gradient function): shown is reverse mode, "
                "what backpropagation computes",
            )
    note = ""
    if mode == "reverse":
        blocks, passes, vectorised = _reverse(function, values, wrt, outputs)
        if not vectorised:
            note = (
                "TensorFlow could not vectorise this gradient (e.g. a tf.py_function): the "
                "Jacobian rows were computed one eager VJP at a time"
            )
    else:
        blocks, passes = _forward(function, values, wrt, outputs), in_size
    return Jacobians(blocks=blocks, mode=mode, passes=passes, note=note)


def _agrees_with_reverse(function, point, wrt, outputs, blocks) -> bool:
    """One random VJP per output against the forward-mode blocks: J^T v both ways.

    Forward mode differentiates the forward ops, reverse mode calls registered and
    custom gradients; they differ exactly when a gradient function is not the
    derivative of its op, and then the Jacobian users want is reverse mode's.
    Rule: both sides are exact up to round-off, so they agree to about half
    the digits of the coarsest differentiated dtype: rtol 1e-8 in float64,
    scaled by sqrt(eps / eps of float64) in another dtype (2.3e-4 in
    float32). The fixed 1e-8 told every float32 model's two modes apart, a
    TensorFlow Probability bijector kept in float32 among them, and named a
    custom gradient that was not there.
    """
    from gradcli.numerics.difference_rule import machine_eps

    eps = max(machine_eps(np.asarray(point[n]).dtype) for n in wrt)
    rtol = 1e-8 * np.sqrt(eps / machine_eps(np.float64))
    rng = np.random.default_rng(0)
    for o in outputs:
        block = blocks[(o, wrt[0])]
        out_shape = block.shape[: block.ndim - np.ndim(point[wrt[0]])]
        v = rng.standard_normal(out_shape)
        reverse = vjp(function, point, wrt, {o: v})
        for n in wrt:
            b = blocks[(o, n)].reshape(v.size, -1)
            forward = v.reshape(-1) @ b
            g = checked_gradient(reverse[n], np.shape(point[n]))
            if isinstance(g, WrongShape) or isinstance(blocks[(o, n)], WrongShape):
                return False  # reverse mode's blocks carry the wrong shape
            g = np.zeros_like(forward) if g is None else g.reshape(-1)
            scale = np.linalg.norm(v) * np.linalg.norm(b) + 1e-300
            if np.linalg.norm(forward - g) > rtol * scale:
                return False
    return True


def _reverse(function, values, wrt, outputs):
    """One VJP per output element, all in one ``tf.vectorized_map`` over the unit
    cotangents (about twice as fast as ``tape.jacobian``, whose pfor also
    vectorises its gather of each target element). One plain VJP per output
    first tells which inputs it reaches, so disconnected blocks stay None.
    Returns ``(blocks, passes, vectorised)``; ``vectorised`` is False when some
    rows had to come from ``_rows_one_by_one``.

    Up to ``EAGER_MAX_ROWS`` rows are eager VJPs on the one tape instead: the
    same products, without a trace. ``vectorized_map`` traces a new function on
    every call (about 25 ms for a 6-element output; from the fifth call in a
    process TensorFlow warns of retracing), where six eager VJPs take 1-3 ms,
    and 32 about the cost of the trace."""
    parts, shapes = reverse_parts(function, values, wrt, outputs, _rows_or_failure)
    return _blocks_of(function, values, wrt, outputs, parts, shapes)


def reverse_parts(function, values, wrt, outputs, rows_of) -> tuple[dict, dict]:
    """The tensors of ``_reverse``, eagerly or inside a trace (``Program``): per
    output, the reach gradients (one VJP: None where disconnected) and the
    rows ``rows_of(tape, y, sources, size, first)`` gives for the inputs
    whose reach gradient has the input's shape (None when there is no such
    input, or one row: the reach gradient is that row); and per output its
    (shape, dtype). None-ness and shape are the graph's, not the seed's:
    where rows are unrolled the reach VJP's seed is the first unit cotangent
    and it is the first row (``first``: one backward pass fewer), else ones."""
    call_values, watched = sources_of(function, values, wrt)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(watched)
        result = function(call_values)
    parts, shapes = {}, {}
    for o in outputs:
        y = result[o]
        shapes[o] = (tuple(y.shape), y.dtype)
        size = int(np.prod(y.shape, dtype=np.int64))
        unrolled = 1 < size <= EAGER_MAX_ROWS
        seed = tf.reshape(tf.one_hot(0, size, dtype=y.dtype), y.shape) if unrolled else tf.ones_like(y)
        reach = reverse(tape, y, watched, output_gradients=seed)
        connected = [i for i, (n, g) in enumerate(zip(wrt, reach))
                     if g is not None and tuple(g.shape) == tuple(values[n].shape)]
        first = [reach[i] for i in connected] if unrolled else None
        rows = rows_of(tape, y, [watched[i] for i in connected], size, first) if connected and size != 1 else None
        parts[o] = {"reach": reach, "rows": rows}
    return parts, shapes


def _rows_or_failure(tape, y, sources, size, first=None):
    """The rows of ``reverse_parts`` eagerly, or the exception that stops them
    (``_blocks_of`` then takes them one by one, ``_rows_one_by_one``)."""
    try:
        return _rows(tape, y, sources, size, first)
    except Exception as exc:  # noqa: BLE001 - TensorFlow raises many types here
        return exc


def _rows(tape, y, sources, size, first=None):
    """Each source's rows J[i, :] of ``y``: unit cotangents, unrolled up to
    ``EAGER_MAX_ROWS`` (the first given as ``first``), else one ``tf.vectorized_map``."""
    seeds = tf.reshape(tf.eye(size, dtype=y.dtype), (size,) + tuple(y.shape))

    def row(c):
        return reverse(tape, y, sources, output_gradients=c, zeros=True)

    return _eager_rows(row, seeds, size, first) if size <= EAGER_MAX_ROWS else tf.vectorized_map(row, seeds)


def _blocks_of(function, values, wrt, outputs, parts, shapes):
    """``_reverse``'s result from ``reverse_parts``' (as numpy): the shape rule
    on each reach gradient and row, disconnected blocks None."""
    blocks, passes, vectorised = {}, 0, True
    for o in outputs:
        reach, rows = parts[o]["reach"], parts[o]["rows"]
        reach = [checked_gradient(to_numpy(g), values[n].shape) for n, g in zip(wrt, reach)]
        for n, g in zip(wrt, reach):
            blocks[(o, n)] = g if isinstance(g, WrongShape) else None
        connected = [n for n, g in zip(wrt, reach) if isinstance(g, np.ndarray)]
        y_shape, y_dtype = shapes[o]
        size = int(np.prod(y_shape, dtype=np.int64))
        passes += size
        if not connected:
            continue
        if size == 1:  # the one pass is the reach gradient itself: no trace to pay for
            for n, g in zip(wrt, reach):
                if isinstance(g, np.ndarray):
                    blocks[(o, n)] = g.reshape(y_shape + tuple(values[n].shape))
            continue
        if isinstance(rows, Exception):
            seeds = tf.reshape(tf.eye(size, dtype=y_dtype), (size,) + y_shape)
            rows, vectorised = _rows_one_by_one(function, values, connected, o, seeds), False
        for n, j in zip(connected, rows):
            j = j if isinstance(j, WrongShape) else checked_gradient(
                to_numpy(j), (size,) + tuple(values[n].shape))
            if isinstance(j, WrongShape):  # one row's shape, not the stacked rows'
                blocks[(o, n)] = WrongShape(tuple(values[n].shape), j.got[1:] or j.got)
            else:
                blocks[(o, n)] = j.reshape(y_shape + tuple(values[n].shape))
    return blocks, passes, vectorised


def _eager_rows(row, seeds, size: int, first=None) -> list:
    """``tf.vectorized_map(row, seeds)`` as eager calls (the first row ``first``, if taken): stacked."""
    rows = ([first] if first is not None else []) + [row(seeds[i]) for i in range(size) if i or first is None]
    return [tf.stack(column) for column in zip(*rows)]


def _rows_one_by_one(function, values, wrt, output, seeds) -> list[np.ndarray]:
    """The rows of ``_reverse``, one eager VJP per output element, each on a
    fresh tape: for gradients that cannot run in the vectorised graph or twice
    on one tape (a ``tf.py_function``'s gradient calls back into Python once
    per recorded call). A real failure raises again here. An input whose
    gradient comes back in another shape gets that ``WrongShape``."""
    rows = []
    for c in seeds:
        grads = vjp(function, values, wrt, {output: c})
        grads = {n: checked_gradient(grads[n], values[n].shape) for n in wrt}
        rows.append([np.zeros(np.shape(values[n])) if grads[n] is None else grads[n] for n in wrt])
    columns = []
    for column in zip(*rows):
        wrong = [g for g in column if isinstance(g, WrongShape)]
        columns.append(wrong[0] if wrong else np.stack(column))
    return columns


def _forward(function, values, wrt, outputs):
    """Columns of the Jacobian: JVPs along every unit vector of each input, in one batch."""
    blocks = {}
    for n in wrt:
        x = values[n]
        size = int(np.prod(x.shape, dtype=np.int64))
        eye = np.eye(size, dtype=x.dtype.as_numpy_dtype).reshape((size,) + tuple(x.shape))
        cols = _columns(function, values, {n: eye}, outputs)
        for o in outputs:
            c = cols[o]  # [input size, *output shape]
            out_shape = c.shape[1:]
            c = np.moveaxis(c.reshape(size, -1), 0, 1)
            blocks[(o, n)] = c.reshape(out_shape + tuple(x.shape))
    return blocks


#: Up to this many tangents, JVPs are taken eagerly, one each; more in one
#: traced function (``traced_in_one``). Measured at k = 3, a fresh trace as each
#: check takes it: traced 0.04-0.6 s against eager 0.003-0.28 s on small models
#: and a tiny GPT-2, 1.8 s against 0.9 s on a 2-layer GPT-2, 17 s against 15 s
#: on tfp.math.bessel_ive (TensorFlow caches eager per-op JVPs across models).
EAGER_MAX_TANGENTS = 32


def traced_in_one(tangents: dict) -> bool:
    """Whether tangents ``[k, *shape]`` are past ``EAGER_MAX_TANGENTS``: the one rule."""
    return len(next(iter(tangents.values()))) > EAGER_MAX_TANGENTS


def _columns(function, values, tangents, outputs) -> dict:
    """``_forward``'s JVPs: eagerly up to ``EAGER_MAX_TANGENTS``, as the
    model's call takes them, else in one trace (``traced_jvp``), and eagerly
    where the function cannot be traced (a failure of its own raises there)."""
    if traced_in_one(tangents):
        try:
            return traced_jvp(function, values, tangents, outputs)
        except Exception:  # noqa: BLE001 - not traceable: eager JVPs, where a real failure raises
            pass
    return batched_jvp(function, values, tangents, outputs)


def functions_eager() -> bool:
    """Whether ``tf.function`` calls run their bodies eagerly (``functions_run_eagerly``)."""
    return tf.config.functions_run_eagerly()


def batched_jvp(function: Callable, point: dict, tangents: dict, outputs: list[str]) -> dict:
    """J t for a batch of tangents, each an eager JVP (``jvp``).

    ``tangents`` maps input name -> array ``[k, *input_shape]`` (the same k for
    every input; inputs left out get no tangent). Returns output name ->
    ``[k, *output_shape]``. The eager JVP is the user's forward mode where it
    differs from a traced one (a ``tf.custom_gradient``, module docstring);
    elsewhere ``traced_jvp`` gives the same products for one trace.
    """
    names = list(tangents)
    k = len(next(iter(tangents.values())))
    rows = [jvp(function, point, {n: tangents[n][i] for n in names}, outputs) for i in range(k)]
    return {o: np.stack([r[o] for r in rows]) for o in outputs}


def traced_jvp(function: Callable, point: dict, tangents: dict, outputs: list[str],
               returned: dict | None = None) -> dict:
    """``batched_jvp`` with every JVP taken inside a traced function: a
    concrete function (no autograph) whose body is ``jvp_tensors``, forward
    mode as a compiled JVP or HVP takes it (module docstring: it differs from
    the eager JVP only at a ``tf.custom_gradient``). Up to
    ``EAGER_MAX_TANGENTS`` tangents (``traced_in_one`` says no), the trace
    takes one tangent and is called once for each: a trace without a loop
    costs less than the rows' ``tf.map_fn`` for a few (55 custom-gradient test
    models, 3 tangents each, a fresh trace each: 3.45 s against 5.45 s, the
    same JVPs to the bit in 53 and to 1e-16 of their size in the other two);
    more run in one call of ``jvp_rows``, the body a warm check's
    ``Program.batched_jvp`` runs. ``returned``: output name -> (shape, dtype)
    where the caller knows them (a trace of the function), else one call at
    the point tells (``output_specs``). Raises where the function cannot be
    traced."""
    values = tensors_of(point)
    # The weights the function holds as variables are made here, eagerly, and
    # captured by the trace: a trace cannot make a variable from its own input.
    held = getattr(function, "variables", ())
    variables = {n: held_variable(n, values[n]) for n in tangents if n in held}
    plain = {n: v for n, v in values.items() if n not in variables}
    signature = {n: tf.TensorSpec(v.shape, v.dtype) for n, v in plain.items()}
    stacked, specs = _tangent_batch(tangents)
    k = len(next(iter(tangents.values())))
    if k and not traced_in_one(tangents):
        one = {n: tf.TensorSpec(spec.shape[1:], spec.dtype) for n, spec in specs.items()}
        run = tf.function(lambda plain, tangent: jvp_tensors(function, {**plain, **variables}, tangent, outputs),
                          autograph=False).get_concrete_function(signature, one)
        rows = [run(plain, {n: t[i] for n, t in stacked.items()}) for i in range(k)]
        return {o: np.stack([np.asarray(row[o]) for row in rows]) for o in outputs}
    returned = (output_specs(function, {**plain, **variables}) if returned is None
                else {o: tf.TensorSpec(shape, dtype) for o, (shape, dtype) in returned.items()})
    run = tf.function(lambda plain, batch: jvp_rows(function, {**plain, **variables}, batch, outputs, returned),
                      autograph=False).get_concrete_function(signature, specs)
    rows = run(plain, stacked)
    return {o: np.asarray(rows[o]) for o in outputs}


def _tangent_batch(tangents: dict) -> tuple[dict, dict]:
    """The tangents (input name -> ``[k, *shape]``) as tensors, and their specs
    with k left open: the arguments of a traced JVP's body (``jvp_rows``),
    traced once for any number of tangents."""
    batch = {n: tf.convert_to_tensor(t) for n, t in tangents.items()}
    return batch, {n: tf.TensorSpec([None, *t.shape[1:]], t.dtype) for n, t in batch.items()}


def jvp_rows(function: Callable, values: dict, batch: dict, outputs: list[str], returned: dict) -> dict:
    """``jvp_tensors`` for each tangent of ``batch`` (input name -> ``[k, *shape]``),
    one accumulator each, inside a trace: the body of a warm check's traced
    JVPs (``Program.batched_jvp``) and of ``traced_jvp`` past
    ``EAGER_MAX_TANGENTS``; ``returned`` holds the outputs' specs. The rows
    run in a ``tf.map_fn``, so the JVP is traced once whatever k is (a
    6-16-3 MLP, trace and run: 0.07-0.11 s; pfor 0.17-0.34 s)."""
    returned = {o: returned[o] for o in outputs}
    return tf.map_fn(lambda t: jvp_tensors(function, values, t, outputs), batch, fn_output_signature=returned)


def output_specs(function: Callable, values: dict) -> dict:
    """Each output's ``tf.TensorSpec``, from one call at ``values`` (fresh tensors)."""
    return {o: tf.TensorSpec(y.shape, y.dtype) for o, y in function(fresh(values)).items()}


# -- the same products, traced once for a function called again ----------------


class Program:
    """The products of one function at fixed input specs, each a traced
    concrete function (no autograph) whose body is the eager product's own
    (``reverse_parts``, ``vjp_tensors``, ``jvp_tensors``): the forward values
    (at one point, or at many in one call), the reverse-mode Jacobian, VJPs
    for given cotangents and JVPs for given tangents, as numpy, by the same
    rules as ``jacobians``, ``vjps`` and ``batched_jvp``. Each is traced once
    per structure of its arguments (``_traced``) and then only run: what makes
    a warm check of a function already checked cheap (``analyses.check.warm``,
    which says when a program may stand for the function). Tracing raises
    where the function cannot be traced (Python control flow on a tensor's
    value) or a gradient's shape is not known statically: the caller then
    takes the eager products.

    Concrete functions, not ``tf.function`` calls: a call of one costs a third
    of a ``tf.function``'s, and tracing one is not a "call with tracing"
    (TensorFlow warns of retracing when the same code, here every program's,
    is traced on five of its recent calls: a test module that checks twenty
    functions would see the warning)."""

    def __init__(self, function: Callable, specs: dict, wrt: list[str], outputs: list[str]):
        self.function, self.specs = function, specs
        self.names, self.wrt, self.outputs = list(specs), list(wrt), list(outputs)
        self.shapes: dict = {}  # output -> (shape, dtype), read while tracing the Jacobian
        self._traces: dict = {}
        self._forward = self._traced("forward", lambda *flat: self._outputs(dict(zip(self.names, flat))),
                                     *[specs[n] for n in self.names])

    def _outputs(self, values):
        results = self.function(values)
        return {o: results[o] for o in self.outputs}

    def _traced(self, key, body, *specs):
        """The concrete function of ``body`` at ``specs``, traced on first use."""
        found = self._traces.get(key)
        if found is None:
            found = self._traces[key] = tf.function(body, autograph=False).get_concrete_function(*specs)
        return found

    def _signature(self) -> dict:
        return {n: self.specs[n] for n in self.names}

    def values(self, point: dict) -> dict:
        return {n: tensor_of(point[n]) for n in self.names}

    def reverse_graphs(self) -> list:
        """The graphs of the reverse-mode products traced so far (the Jacobian's
        and the VJPs'), where the function's gradient functions run; empty
        until the Jacobian is traced."""
        if "jacobian" not in self._traces:
            return []
        return [t.graph for key, t in self._traces.items() if key == "jacobian" or (isinstance(key, tuple) and key[0] == "vjps")]

    def forward(self, values: dict) -> dict:
        """The outputs at ``values`` (tensors), as a model function returns them."""
        return self._forward(*[values[n] for n in self.names])

    __call__ = forward

    def many(self, stacked: dict) -> dict:
        """``forward`` at k points in one call: input -> ``[k, *shape]``, output -> ``[k, *shape]``."""
        returned = {o: tf.TensorSpec(t.shape, t.dtype) for o, t in self._forward.structured_outputs.items()}

        def many(stacked):  # one point per leading index, the same graph for each
            return tf.map_fn(self._outputs, stacked, fn_output_signature=returned)

        run = self._traced("many", many, {n: tf.TensorSpec([None, *self.specs[n].shape], self.specs[n].dtype)
                                          for n in self.names})
        return run({n: stacked[n] for n in self.names})

    def jacobians(self, point: dict) -> dict:
        """``jacobians(..., mode="reverse").blocks`` of every output for ``wrt``."""
        def jacobian(values):  # inside the trace a failure of the rows raises
            parts, self.shapes = reverse_parts(self.function, values, self.wrt, self.outputs, _rows)
            if any(g is not None and not g.shape.is_fully_defined() for p in parts.values() for g in p["reach"]):
                raise ValueError("a gradient's shape is not known while tracing")
            return parts

        values = self.values(point)
        parts = self._traced("jacobian", jacobian, self._signature())(values)
        return _blocks_of(None, values, self.wrt, self.outputs, parts, self.shapes)[0]

    def vjps(self, point: dict, seeds: list[dict]) -> list[dict]:
        """``vjps`` at ``point``."""
        seeds = [{o: tf.convert_to_tensor(c) for o, c in seed.items()} for seed in seeds]
        specs = [{o: tf.TensorSpec(c.shape, c.dtype) for o, c in seed.items()} for seed in seeds]
        key = ("vjps", tuple(tuple((o, s.shape, s.dtype) for o, s in seed.items()) for seed in specs))
        run = self._traced(key, lambda values, seeds: vjp_tensors(self.function, values, self.wrt, seeds),
                           self._signature(), specs)
        products = run(self.values(point), seeds)
        return [{n: to_numpy(g) for n, g in zip(self.wrt, grads)} for grads in products]

    def batched_jvp(self, point: dict, tangents: dict, outputs: list[str]) -> dict:
        """``traced_jvp`` at ``point`` (tangents of ``wrt`` only), traced once for any number of tangents."""
        batch, specs = _tangent_batch(tangents)
        key = ("jvps", tuple((n, s.shape, s.dtype) for n, s in specs.items()))
        returned = {o: tf.TensorSpec(t.shape, t.dtype) for o, t in self._forward.structured_outputs.items()}
        run = self._traced(key, lambda values, batch: jvp_rows(self.function, values, batch, self.outputs, returned),
                           self._signature(), specs)
        rows = run(self.values(point), batch)
        return {o: np.asarray(rows[o]) for o in outputs}


# -- second derivatives of a scalar function (traceable: tensors in, tensors out) --


def gradient_of(scalar: Callable, x):
    """Gradient of ``scalar(x)`` (a scalar tensor) at the tensor ``x``; zeros
    where ``x`` does not reach it."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scalar(x)
    return reverse(tape, y, x, zeros=True)


def hvp_forward_over_reverse(scalar: Callable, x, v):
    """H v as the forward-mode derivative (along ``v``) of the reverse-mode
    gradient: one gradient's cost plus a constant factor, no Hessian built."""
    with forward_accumulator(x, v) as acc:
        g = gradient_of(scalar, x)
    return forward(acc, g, zeros=True)


def hvp_reverse_over_reverse(scalar: Callable, x, v):
    """H v as the gradient of <grad f(x), v> (Pearlmutter's reverse-over-reverse);
    an independent route through TensorFlow's gradient code, used to cross-check."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        g = gradient_of(scalar, x)
        gv = tf.reduce_sum(g * tf.stop_gradient(v))
    return reverse(tape, gv, x, zeros=True)
