"""What a differentiated call does besides its derivatives: the values it
returns under a tape or an accumulator (``values_differentiated``), and where
it turns a tensor that carries an input's derivative into numpy
(``numpy_conversions``). The tapes and accumulators are ``autodiff``'s
(``sources_of``, ``forward_accumulator``, ``reverse``): the calls are the ones
the analytic side makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gradcli.numerics.autodiff import forward_accumulator, reverse, sources_of
from gradcli.numerics.held import tensors_of
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()



def values_differentiated(function: Callable, point: dict, wrt: list[str]) -> dict:
    """The outputs of ``function`` at ``point`` as the analytic side computes
    them: under a ``GradientTape`` watching ``wrt`` (``sources_of``, as every
    reverse product of this module) and under a ``ForwardAccumulator`` with a
    tangent on each of ``wrt`` (as every JVP). Returns way -> output name ->
    array, the way spelled as a report names it ("under a GradientTape",
    "under a ForwardAccumulator"). A way whose call raises is left out.

    Code may compute other values when a gradient is recorded: TensorFlow runs
    a ``tf.function``'s forward-and-backward pair rather than its inference
    body (``record.could_possibly_record``), and TensorFlow Probability's
    samplers pick their implementation by that (its Gamma and Beta draws)."""
    found = {}
    call_values, sources = sources_of(function, tensors_of(point), wrt)
    try:
        with tf.GradientTape() as tape:
            tape.watch(sources)
            found["under a GradientTape"] = {o: np.asarray(v) for o, v in function(call_values).items()}
    except Exception:  # noqa: BLE001 - the check reports a call that raises
        pass
    call_values, sources = sources_of(function, tensors_of(point), wrt)
    try:
        with forward_accumulator(sources, [tf.ones_like(s) for s in sources]):
            found["under a ForwardAccumulator"] = {o: np.asarray(v) for o, v in function(call_values).items()}
    except Exception:  # noqa: BLE001
        pass
    return found


#: At most this many conversions to numpy are recorded by ``numpy_conversions``.
MAX_CONVERSIONS = 64


@dataclass
class Conversion:
    """A tensor carrying an input's derivative turned into numpy during a
    differentiated call: ``stack`` the Python frames (outermost first) at the
    conversion, ``shape`` and ``dtype`` the tensor's."""

    stack: list
    shape: tuple
    dtype: str


def numpy_conversions(function: Callable, point: dict, name: str) -> list[Conversion]:
    """Where a differentiated call turns a tensor that carries input ``name``'s
    derivative into numpy (``EagerTensor.numpy()``, ``np.asarray``,
    ``tf.get_static_value``, ``float()``: every one goes through
    ``EagerTensor._numpy``). Whatever is computed from that copy is a constant
    to the tape: the path is cut there, in Python, by no op a graph holds.

    The call runs eagerly on a persistent tape watching ``name``;
    ``EagerTensor._numpy`` is wrapped for its duration (process-wide: no other
    thread of gradcli computes while pairs are explained) to record each
    floating tensor converted and the Python stack at the conversion (at most
    ``MAX_CONVERSIONS``). A recorded tensor carries the input when the tape's
    gradient of it with respect to the input is not None."""
    import traceback

    from tensorflow.python.framework.ops import _EagerTensorBase  # the class of every eager tensor

    values, sources = sources_of(function, tensors_of(point), [name])
    recorded = []
    original = _EagerTensorBase._numpy

    def recording(tensor):
        if len(recorded) < MAX_CONVERSIONS and tensor.dtype.is_floating:
            recorded.append((tensor, traceback.extract_stack()[:-1]))
        return original(tensor)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(sources)
        _EagerTensorBase._numpy = recording
        try:
            function(values)
        finally:
            _EagerTensorBase._numpy = original
    found = []
    for tensor, stack in recorded:
        try:
            carried = reverse(tape, tensor, sources[0]) is not None
        except Exception:  # noqa: BLE001 - a tensor the tape cannot differentiate carries nothing it knows
            carried = False
        if carried:
            found.append(Conversion(list(stack), tuple(tensor.shape), tensor.dtype.name))
    return found
