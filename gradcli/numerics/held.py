"""A point's arrays held as tensors, converted once.

Every call of a model takes its inputs as tensors, and converting a numpy
array is a copy into fresh memory. A check calls its model dozens of times at
the same point: a BERT-base checked in float64 holds 876 MB of weights, and
converting arrays of more than 8 MB took 13.7 s of one such check's 75 s,
about 6 s of it the point's own arrays converted again at each call
(``bench/README.md``, twentieth round; the check's peak memory fell from 11.1
to 9.3 GB with them held). ``hold`` converts a point once: each numeric array
becomes a read-only view of a tensor that holds its values (a copy: the
caller's arrays are untouched), and ``tensor_of`` gives that tensor back for
the view. Nothing can write to the view (its memory is the tensor's, which
TensorFlow never changes), so the tensor stands for the array as long as the
view lives. Any other value (an array not held, a slice or reshape of a view)
is converted as it always was.

A call still gets tensors no earlier call saw: ``autodiff.fresh`` copies each
input of each call, for the libraries that cache by the input tensor.
"""

from __future__ import annotations

import weakref

import numpy as np

from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: id(view) -> (weak reference to the view, its tensor). An entry leaves when its view dies.
_HELD: dict[int, tuple] = {}
#: Array kinds held: booleans, integers, floating and complex numbers (strings
#: and objects, and numpy's void kinds such as bfloat16, are converted each time).
_KINDS = "biufc"


def hold(values: dict) -> dict:
    """``values`` (name -> value), in place: each numeric numpy array not held
    already is replaced by a read-only view of a tensor holding its values.
    Returns ``values``."""
    for name, value in values.items():
        if not isinstance(value, np.ndarray) or value.dtype.kind not in _KINDS or _entry(value) is not None:
            continue
        tensor = tf.convert_to_tensor(value)
        view = np.asarray(tensor)
        if view.flags.writeable or view.dtype != value.dtype or view.shape != value.shape:
            continue  # not the tensor's own memory: nothing to hold
        _keep(view, tensor)
        values[name] = view
    return values


def _keep(view: np.ndarray, tensor) -> None:
    """``tensor_of(view)`` is ``tensor`` while ``view`` lives."""
    key = id(view)
    _HELD[key] = (weakref.ref(view, lambda ref, key=key: _drop(key, ref)), tensor)


#: TensorFlow's CPU tensors start on a 64-byte boundary: one taken from
#: memory that does not (numpy's own allocations start 16 bytes into a page)
#: aborts the process at its first op, so ``formed`` aligns its own.
ALIGNMENT = 64


def formed(shape, dtype, fill):
    """A tensor of ``shape`` and ``dtype`` holding what ``fill(out)`` writes
    into a fresh flat array ``out``: the tensor takes that array's memory
    (DLPack), where converting an array copies it into fresh memory once more.
    A point the joint check forms for a BERT-base is 876 MB of float64, 12
    points a check; nothing writes to the array once ``fill`` returns. Kinds
    DLPack does not carry (bfloat16, strings), and empty or 0-d values, are
    converted as before."""
    return tensor_of(formed_array(shape, dtype, fill))


def formed_array(shape, dtype, fill) -> np.ndarray:
    """``formed``'s values as a read-only array held (``hold``): ``tensor_of``
    gives the tensor that shares its memory, so an array the caller reads in
    numpy and passes to TensorFlow (the layer pass's tangents, 0.93 GB for
    GPT-2 small's token embedding) is in memory once, never copied. Kinds
    ``formed`` converts are returned as they were filled, not held."""
    dtype, shape = np.dtype(dtype), tuple(shape)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype.kind not in "fc" or size == 0 or not shape:
        out = np.empty(size, dtype)
        fill(out)
        return out.reshape(shape)
    raw = np.empty(size * dtype.itemsize + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    out = raw[start:start + size * dtype.itemsize].view(dtype)
    fill(out)
    exported = out.reshape(shape)
    tensor = tf.experimental.dlpack.from_dlpack(exported.__dlpack__())
    # Another array object over the same memory: the tensor keeps ``exported``
    # alive, and a view it kept alive would keep its own entry (and so the
    # tensor) alive for ever.
    view = exported.view()
    view.flags.writeable = False
    _keep(view, tensor)
    return view


def normals(rng):
    """A ``fill`` of standard normals from ``rng``, drawn where ``out`` is: the
    numbers ``rng.standard_normal(out.shape).astype(out.dtype)`` would give
    (drawn in float64, rounded to a coarser dtype), without that array."""
    def fill(out):
        if out.dtype == np.float64 and out.flags.c_contiguous:
            rng.standard_normal(out=out)
        else:
            out[...] = rng.standard_normal(out.shape)
    return fill


def tensor_of(value):
    """The tensor a held view stands for (``hold``), else ``value`` converted."""
    entry = _entry(value)
    return entry[1] if entry is not None else tf.convert_to_tensor(value)


def tensors_of(values: dict) -> dict:
    """``tensor_of`` each value of ``values``."""
    return {name: tensor_of(value) for name, value in values.items()}


def _entry(value):
    entry = _HELD.get(id(value))
    return entry if entry is not None and entry[0]() is value else None


def _drop(key: int, ref) -> None:
    entry = _HELD.get(key)
    if entry is not None and entry[0] is ref:
        del _HELD[key]
