"""TensorFlow's process-wide forward-mode functions: every op's JVP is computed
by a ``tf.function`` that ``forwardprop`` traces per op signature and keeps in
one cache for the whole process. ``kept()`` is how every forward-mode product
of gradcli meets that cache (``numerics.autodiff.forward_accumulator``): bounded
in size, traced for relaxed shapes from the first op on, and looked up by the
exact signature first (``SignatureFront``).

One lock (``CACHE_LOCK``) for what is shared and not thread-safe: TensorFlow's
cache (a lookup scans it, a trace grows it: two threads at once raised
"OrderedDict mutated during iteration" in an EfficientNet-B0's joint check
beside its layer pass), the settings ``kept()`` changes and restores, and
which dispatch is registered. It is held where those are met: TensorFlow's
dispatch and tracing (``SignatureFront.dispatch`` on a signature it has not
kept), the bound, entering and leaving ``kept()``. A JVP function the front
keeps runs without it, so forward-mode products on two threads (the joint
check's JVPs and the layer pass's probes) run beside each other: held for
every product, a ResNet-50's layer pass waited 6.6 s for the joint check's
JVPs (5.3 s at once). Where this TensorFlow has no front (another version's
internals), every dispatch is TensorFlow's, and ``kept()`` holds the lock for
the whole product, as before.

TensorFlow's switch to run ``tf.function`` bodies eagerly is process-wide too:
``functions_run_eagerly`` counts its entries across threads the same way
(``SharedSetting``).
"""

from __future__ import annotations

import contextlib
import os
import threading

#: What the module docstring says is shared: held where it is met.
CACHE_LOCK = threading.RLock()


@contextlib.contextmanager
def kept():
    """The cache bounded (``_bounded``), shapes relaxed (``_relaxed_shapes``)
    and lookups fronted (``_fronted``) for the duration, each thread's
    entries counted together (``_KEPT``: the first sets them, the last
    restores them; module docstring for the lock)."""
    global _FRONT
    with CACHE_LOCK:
        _bounded()
        if _FRONT is None:
            _FRONT = SignatureFront.of_this_tensorflow()
        _KEPT.enter()
    try:
        if _FRONT is not None:
            yield
        else:  # TensorFlow's own dispatch meets its cache at every op
            with CACHE_LOCK:
                yield
    finally:
        with CACHE_LOCK:
            _KEPT.leave()


class SharedSetting:
    """A process-wide setting entered from any thread: the entries are
    counted together, the first applies it (``apply()``, which returns what it
    found) and the last restores that (``restore(found)``). Each entry
    restoring what it found itself turned a setting off under another thread
    still inside, and left it on when two entries left in turn. The caller
    holds the lock that guards the setting around ``enter`` and ``leave``."""

    def __init__(self, apply, restore):
        self.apply, self.restore = apply, restore
        self.entries, self.found = 0, None

    def enter(self) -> None:
        if self.entries == 0:
            self.found = self.apply()
        self.entries += 1

    def leave(self) -> None:
        self.entries -= 1
        if self.entries == 0:
            self.restore(self.found)


def _keep() -> int | None:
    """``kept()``'s setting applied: shapes relaxed and the front registered;
    the trace limit found."""
    limit = _relaxed_shapes()
    _fronted(True)
    return limit


def _unkeep(limit) -> None:
    _restore_shapes(limit)
    _fronted(False)


#: ``kept()``'s entries on every thread (``CACHE_LOCK`` held).
_KEPT = SharedSetting(_keep, _unkeep)


def _relaxed_shapes():
    """TensorFlow's forward mode from the first trace of each op as it runs past
    32 (``forwardprop._TRACE_COUNT_LIMIT``): an op's JVP function is traced for
    its exact shapes first and, met at another shape, once more for shapes
    relaxed to the dimensions that differ (``reduce_retracing``), rather than
    once per shape. The same ops compute each JVP (the verdict table over 339
    files came out unchanged); what changes is how often a JVP is traced and
    how long the cache a lookup scans grows. Measured on five check-heavy test modules in one
    process: 305 traces of JVP functions against 564, 67.4 s of CPU against 70.1 s.
    Returns the limit it found, which ``_restore_shapes`` puts back on leaving
    (the process's own forward mode is its own); None in another TensorFlow
    (its own rule)."""
    from tensorflow.python.eager import forwardprop

    limit = getattr(forwardprop, "_TRACE_COUNT_LIMIT", None)
    if limit is not None:
        forwardprop._TRACE_COUNT_LIMIT = 0
    return limit


def _restore_shapes(limit) -> None:
    if limit is not None:
        from tensorflow.python.eager import forwardprop

        forwardprop._TRACE_COUNT_LIMIT = limit


#: Bound on TensorFlow's process-wide cache of forward-mode op functions, one
#: per op signature a JVP meets (35-56 for a 2-layer keras-hub transformer).
JVP_FUNCTIONS_MAX = 4096


def _bounded() -> None:
    """Empty that cache past ``JVP_FUNCTIONS_MAX``: a signature not in it is
    looked up by a scan of every entry, so a process that checks many models
    (a test suite, an API caller) paid more for each, while each entry emptied
    is traced again (about 24 ms) when next met. Eight test modules in one
    process: 152 s unbounded, 129 s at 256, 124 s at 1024, 114 s at 4096. The
    per-op trace counts go too (past 32 TensorFlow relaxes an op's shapes),
    and the front's entries with them (``SignatureFront``)."""
    from tensorflow.python.eager import forwardprop

    cache = getattr(forwardprop, "_jvp_function_cache", None)
    if cache is not None and len(cache) > JVP_FUNCTIONS_MAX:
        cache.clear()
        getattr(forwardprop, "_TRACE_COUNT", {}).clear()
        if _FRONT is not None:
            _FRONT.functions.clear()


class SignatureFront:
    """TensorFlow's JVP dispatch (``forwardprop._jvp_dispatch``) with a
    dictionary in front, keyed by the exact signature of the call.

    For every op a forward pass runs, TensorFlow's dispatch builds the call's
    ``FunctionType``, hashes it again at each dictionary it consults (the
    hash is not kept, and walks every parameter), and scans its table where
    the signature is not there exactly, which, with shapes relaxed, it never
    is. That lookup was half of an eager JVP's time: 3 JVPs of each of 60
    test models, warm, 1.81 s against 0.99 s with this front. The front
    keys the call by what TensorFlow's lookup reads from it (the op and its
    attributes, each tensor's type, dtype and shape, the tracing rule
    TensorFlow's count chooses, and TensorFlow's own function context: the
    graph, device and XLA scope a trace is made in), and keeps the concrete
    function TensorFlow's dispatch traced or found for it on the first call,
    made by TensorFlow's own code, and its flat arguments checked to be the
    call's tensors in order. A later call with the same key runs that
    function on its tensors: the call TensorFlow makes after its lookup
    (``tracing_compilation.call_function``), without the lookup. A call it
    cannot key exactly (a composite tangent such as ``tf.IndexedSlices``, a
    resource or variant tensor, an attribute that does not hash) goes to
    TensorFlow's dispatch as it is."""

    def __init__(self, forwardprop, tracing_compilation, function_context, plain_types):
        self.forwardprop = forwardprop
        self.trace_function = tracing_compilation.trace_function
        self.make_context = function_context.make_function_context
        self.plain_types = plain_types
        self.functions: dict = {}  # key -> the concrete function, or None: TensorFlow's dispatch each time

    @classmethod
    def of_this_tensorflow(cls) -> "SignatureFront | None":
        """The front, or None where this TensorFlow lacks what it reads (another
        version's internals): its dispatch then runs alone, as it always did."""
        try:
            from tensorflow.python import pywrap_tfe
            from tensorflow.python.eager import forwardprop
            from tensorflow.python.eager.polymorphic_function import function_context, tracing_compilation
            from tensorflow.python.framework import ops

            for needed in ("_jvp_dispatch", "_jvp_exact_config", "_jvp_relaxed_config", "_TRACE_COUNT",
                           "_TRACE_COUNT_LIMIT"):
                getattr(forwardprop, needed)
            tracing_compilation.trace_function  # noqa: B018 - present, or the front stands aside
            function_context.make_function_context  # noqa: B018
            pywrap_tfe.TFE_Py_RegisterJVPFunction  # noqa: B018
            return cls(forwardprop, tracing_compilation, function_context, (ops.EagerTensor, ops.SymbolicTensor))
        except (ImportError, AttributeError):
            return None

    def dispatch(self, op_name, attr_tuple, inputs, outputs, tangents, use_batch=False):
        """What TensorFlow calls for each op's JVP while the front is registered:
        a kept function runs as it is; TensorFlow's dispatch and tracing run
        under ``CACHE_LOCK`` (module docstring)."""
        forwardprop = self.forwardprop
        # TensorFlow's own rule (``forwardprop._jvp_dispatch``): exact shapes
        # until an op has been traced ``_TRACE_COUNT_LIMIT`` times.
        exact = forwardprop._TRACE_COUNT.get(op_name, 0) < forwardprop._TRACE_COUNT_LIMIT
        config = forwardprop._jvp_exact_config if exact else forwardprop._jvp_relaxed_config
        key = self.key(op_name, attr_tuple, inputs, outputs, tangents, use_batch, exact, config)
        function = self.functions.get(key, False) if key is not None else None
        if function is not None and function is not False:
            return _kept_call(function, inputs, outputs, tangents)
        with CACHE_LOCK:
            return self._dispatched(key, op_name, attr_tuple, inputs, outputs, tangents, use_batch, config)

    def _dispatched(self, key, op_name, attr_tuple, inputs, outputs, tangents, use_batch, config):
        """``dispatch`` for a call the front does not keep (yet), ``CACHE_LOCK``
        held: TensorFlow's dispatch, or the first call of a key (another thread
        may have kept it since it was looked up)."""
        forwardprop = self.forwardprop
        function = self.functions.get(key, False) if key is not None else None
        if function is None:  # not keyed exactly: TensorFlow's dispatch
            return _tensorflows(forwardprop._jvp_dispatch, op_name, attr_tuple, inputs, outputs, tangents, use_batch)
        if function is not False:
            return _kept_call(function, inputs, outputs, tangents)
        # First call of this key: ``tracing_compilation.call_function``'s own steps.
        args = (op_name, attr_tuple, inputs, outputs, tangents, use_batch)
        function = _tensorflows(self.trace_function, args=args, tracing_options=config)
        flat = _tensorflows(function.function_type.unpack_inputs, _tensorflows(function.function_type.bind, *args))
        ours = _flat(inputs, outputs, tangents)
        same = len(flat) == len(ours) and all(a is b for a, b in zip(flat, ours))
        # ``_bounded`` empties the front with TensorFlow's cache; this bound
        # holds where the front grows alone (a key that never equals itself,
        # such as an attribute holding NaN, is added at every call).
        if len(self.functions) >= JVP_FUNCTIONS_MAX:
            self.functions.clear()
        self.functions[key] = function if same else None
        return _tensorflows(function._call_flat, flat, captured_inputs=function.captured_inputs)

    def key(self, op_name, attr_tuple, inputs, outputs, tangents, use_batch, exact, config):
        """The call's exact signature, or None where it has none here."""
        try:
            signature = (_signature(inputs, self.plain_types), _signature(outputs, self.plain_types),
                         _signature(tangents, self.plain_types))
            key = (op_name, _hashable(attr_tuple), signature, bool(use_batch), exact,
                   self.make_context(config.scope_type))
            hash(key)
        except (TypeError, _Unkeyed):
            return None
        return key


def _kept_call(function, inputs, outputs, tangents):
    """A kept JVP function on the call's tensors: the call TensorFlow makes
    after its lookup (``SignatureFront``)."""
    return _tensorflows(function._call_flat, _flat(inputs, outputs, tangents), captured_inputs=function.captured_inputs)


def _tensorflows(call, *args, **kwargs):
    """``call`` (TensorFlow's dispatch, trace or function call) on behalf of the
    front, and nothing else. TensorFlow (and Keras) cut their own frames from
    an error's traceback, which leaves this one the deepest: an exception
    whose deepest frame is here was raised by the code it called, not by
    gradcli (``raised_through_front``), and is the error TensorFlow's dispatch
    raises alone (an op without a forward rule, a user's gradient that fails)."""
    return call(*args, **kwargs)


def raised_through_front(frame) -> bool:
    """Whether a traceback's deepest ``frame`` (a ``traceback.FrameSummary``) is
    ``_tensorflows``: TensorFlow's code raised the exception inside the front."""
    return frame.name == _tensorflows.__name__ and os.path.abspath(frame.filename) == os.path.abspath(__file__)


class _Unkeyed(Exception):
    """A value the front does not key (``SignatureFront.key``)."""


_OPAQUE_DTYPES = frozenset({"resource", "variant"})


def _signature(tensors, plain_types) -> tuple:
    """Each tensor's (type, dtype, shape), None for an absent tangent."""
    signature = []
    for t in tensors:
        if t is None:
            signature.append(None)
            continue
        if type(t) not in plain_types or t.dtype.name in _OPAQUE_DTYPES:
            raise _Unkeyed
        signature.append((type(t), t.dtype, t._shape_tuple()))
    return tuple(signature)


def _hashable(value):
    """Attribute values as TensorFlow's trace type compares them, lists as tuples."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *map(_hashable, value))
    return value


def _flat(inputs, outputs, tangents) -> list:
    """The call's tensors in order: a JVP function's flat arguments."""
    return [t for group in (inputs, outputs, tangents) for t in group if t is not None]


_FRONT: SignatureFront | None = None


def _fronted(on: bool) -> None:
    """``SignatureFront`` registered as TensorFlow's JVP function (``on``), or
    TensorFlow's own dispatch registered again: by the first and the last
    entry of ``kept()``, ``CACHE_LOCK`` held. Nothing where there is no front."""
    if _FRONT is None:
        return
    from tensorflow.python import pywrap_tfe

    pywrap_tfe.TFE_Py_RegisterJVPFunction(_FRONT.dispatch if on else _FRONT.forwardprop._jvp_dispatch)


def _run_functions_eagerly() -> bool:
    """TensorFlow's switch on; what it found."""
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    found = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    return found


def _switch_back(found: bool) -> None:
    from gradcli.tf_import import import_tensorflow

    import_tensorflow().config.run_functions_eagerly(found)


#: ``functions_run_eagerly``'s entries on every thread, and their lock.
_EAGER = SharedSetting(_run_functions_eagerly, _switch_back)
_EAGER_LOCK = threading.Lock()


@contextlib.contextmanager
def functions_run_eagerly():
    """``tf.function`` calls run their Python bodies (``run_functions_eagerly``)
    for the duration: in a graph being traced their ops are inlined; eagerly
    they run op by op. TensorFlow's switch is process-wide: entries on every
    thread are counted together (``SharedSetting``). Checks that enter it do
    not run beside each other (``analyses.check.model._beside_safely``):
    another thread's ``tf.function`` would run its body meanwhile."""
    with _EAGER_LOCK:
        _EAGER.enter()
    try:
        yield
    finally:
        with _EAGER_LOCK:
            _EAGER.leave()
