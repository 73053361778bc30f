"""A Keras model made to compute in float64 (``float64_clone``, else
``stateless_float64_call``).

Keras casts inputs to each layer's compute dtype, so float64 values passed to a
float32 model would be computed in float32; a check in float64 needs a copy of
the model whose every layer computes and keeps its variables in float64,
sharing nothing with the original but the architecture (``keras.keras_model``
passes the original's weights through ``stateless_call``).

A model that cannot be rebuilt (a subclassed model without a ``get_config``
for its arguments: most models written as classes) is run itself in float64
instead: ``stateless_float64_call`` switches the dtype policy of every layer
in its tree to float64 for the duration of the call (``float64_policies``),
and maps its variables to the given float64 values without the cast to the
variables' own dtype that ``stateless_call`` applies. The proof that the
float64 function is the user's (``verdicts.same_function``) compares it with
the model called as it is, in float32, either way.

A float64 call keeps float64 where the model's code casts a float64 value to
float32 (``float32_casts_kept``): Keras' mixed-precision idiom
``ops.cast(x, "float32")`` (keras-hub's RMS norms, Qwen3's query and key
norms) asks for *at least* float32 around an unstable op, a no-op in a
float32 model; in the float64 check it would round the check's values to
float32, and every difference through it would carry float32 round-off
(keras-hub's Qwen3, Mixtral and RoFormer left ``inconclusive`` at float32's
steps and tolerances). A cast's derivative is the identity in either dtype,
so the gradient checked is the same; the report names the casts kept.
"""

from __future__ import annotations

import contextvars
import os
import sys
from contextlib import contextmanager

#: Dtype names a float64 rebuild replaces: every floating compute or variable
#: dtype and mixed-precision policy; integer, bool and string dtypes (an
#: Embedding's int input, a lookup layer's output) stay as they are.
FLOAT_POLICIES = ("float16", "bfloat16", "float32", "float64", "mixed_float16", "mixed_bfloat16")


def float64_clone(layer, sample):
    """A copy of the Keras model ``layer`` whose every layer computes and keeps
    its variables in float64, with the same trainable variables in the same
    order (``stateless_call`` is given the original's weights).

    Mechanism: the model's whole serialized config (nested sublayers, a layer
    inside a wrapper, nested and shared models, the Input layers' dtypes, the
    dtype policy objects) with every floating ``dtype`` set to float64
    (``_float64_config``), deserialized with the model's own classes (its
    custom layers need no registration); else ``keras.models.clone_model``
    with each layer rebuilt from its float64 config (``_float64_layer``, which
    leaves operations such as a functional ``x + y`` as they are). A layer that
    builds its sublayers in ``build`` (``MultiHeadAttention``'s projections)
    gives them its own float64 policy. A subclassed model without a
    ``get_config`` for its arguments cannot be rebuilt: this raises, and the
    caller runs the model in its own dtype with a note giving the reason.
    """
    import keras
    from keras.src.saving import serialization_lib

    classes = {type(sub).__name__: type(sub) for sub in layer._flatten_layers(include_self=True)}
    attempts = (
        lambda: serialization_lib.deserialize_keras_object(
            _float64_config(serialization_lib.serialize_keras_object(layer)),
            custom_objects=classes, safe_mode=False,
        ),
        lambda: keras.models.clone_model(layer, clone_function=_float64_layer, recursive=True),
    )
    failure = None
    for attempt in attempts:
        try:
            clone = attempt()
            _float64_inputs(clone)
            _float64_sublayers(clone)
            if not clone.built:
                clone(sample)
            _same_weights(layer, clone)
            return clone
        except Exception as exc:  # the next mechanism, else the first reason
            failure = failure or exc
    raise failure


def _float64_inputs(model) -> None:
    """A functional model's floating Inputs in float64. A functional call
    converts its data to each Input's dtype, and a library's constructor may
    fix that dtype whatever the model's (keras-hub's ``WhisperBackbone``
    builds ``encoder_features`` as float32): its float64 clone would round
    the data to float32 at the entry, and the check would see float32
    round-off in a model that computes in float64 after it. Keras keeps an
    Input's dtype on its tensor alone (``KerasTensor._dtype``, read by
    ``Functional._convert_inputs_to_tensors``)."""
    for tensor in getattr(model, "_inputs", None) or ():
        dtype = getattr(tensor, "_dtype", None)
        if dtype is not None and _floating_policy(dtype) and dtype != "float64":
            tensor._dtype = "float64"


def _float64_sublayers(model) -> None:
    """Every sublayer without weights of its own computes in float64: a
    library may build one with a fixed floating dtype whatever the model's
    (keras-hub's Falcon builds its attention's ``Softmax`` with
    ``dtype="float32"``, for the stability of a float16 model), which a
    float64 config cannot reach; the check would then see float32 round-off
    in the middle of a float64 model. A sublayer that holds weights keeps its
    dtype here: its variables were made in it (``_same_weights`` refuses a
    float32 trainable weight in the clone)."""
    import keras

    for sub in model._flatten_layers(include_self=False):
        policy = getattr(sub, "dtype_policy", None)
        name = getattr(policy, "name", None)
        if name in FLOAT_POLICIES and name != "float64" and not sub.weights:
            sub.dtype_policy = keras.DTypePolicy("float64")


def _same_weights(layer, clone) -> None:
    """The clone's trainable variables match the original's one for one (shape,
    and layer/variable name) and are float64."""
    ours, theirs = layer.trainable_variables, clone.trainable_variables
    if len(ours) != len(theirs):
        raise ValueError(f"the clone has {len(theirs)} trainable variables, not {len(ours)}")
    for a, b in zip(ours, theirs):
        if tuple(a.shape) != tuple(b.shape) or a.path.split("/")[-2:] != b.path.split("/")[-2:]:
            raise ValueError(f"the clone's variable {b.path} does not match {a.path}")
        if a.dtype in FLOAT_POLICIES and b.dtype != "float64":
            raise ValueError(f"the clone's variable {b.path} is {b.dtype}")


def _float64_config(config):
    """``config`` (a serialized Keras object) with every floating ``dtype``
    entry, at any depth, set to ``"float64"``."""
    if isinstance(config, dict):
        return {
            k: "float64" if k == "dtype" and _floating_policy(v) else _float64_config(v)
            for k, v in config.items()
        }
    if isinstance(config, (list, tuple)):
        return type(config)(_float64_config(v) for v in config)
    return config


def _floating_policy(value) -> bool:
    """A dtype name or a serialized (float) ``DTypePolicy`` naming a floating dtype."""
    if isinstance(value, str):
        return value in FLOAT_POLICIES
    if isinstance(value, dict) and value.get("class_name") in ("DTypePolicy", "FloatDTypePolicy"):
        return (value.get("config") or {}).get("name") in FLOAT_POLICIES
    return False


def _float64_layer(layer):
    """One layer rebuilt from its float64 config (``clone_model``'s fallback);
    an operation that is not a layer (``x + y`` in a functional model) has no
    dtype and is rebuilt as it is."""
    return layer.__class__.from_config(_float64_config(layer.get_config()))


@contextmanager
def float64_policies(layer):
    """Every layer in ``layer``'s tree (itself included) with a floating dtype
    policy computes in float64 for the duration; the policies are restored."""
    saved = []
    try:
        for sub in layer._flatten_layers(include_self=True):
            policy = getattr(sub, "dtype_policy", None)
            if policy is not None and policy.name in FLOAT_POLICIES and policy.name != "float64":
                saved.append((sub, policy))
                sub.dtype_policy = "float64"
        yield
    finally:
        for sub, policy in reversed(saved):
            sub.dtype_policy = policy


def stateless(layer, by_policies: bool, trainable: list, frozen: list, *args, kept: dict | None = None, **kwargs):
    """``layer.stateless_call(trainable, frozen, *args, **kwargs)``, or
    ``stateless_float64_call`` for a layer run in float64 by its switched
    dtype policies (``by_policies``): (outputs, frozen values after). Casts
    of float64 values to float32 keep float64 (``float32_casts_kept``; their
    sites counted in ``kept`` when given)."""
    with float32_casts_kept({} if kept is None else kept):
        if by_policies:
            return stateless_float64_call(layer, trainable, frozen, *args, **kwargs)
        return layer.stateless_call(trainable, frozen, *args, **kwargs)


#: The sites of float32 casts kept float64 in this thread's float64 call
#: (``float32_casts_kept``), or None outside one: a context variable, so a
#: check running beside another on a thread of its own (the joint check
#: beside the layer pass) never sees the other's setting.
_KEPT: contextvars.ContextVar = contextvars.ContextVar("gradcli_float32_casts_kept", default=None)


@contextmanager
def float32_casts_kept(sites: dict):
    """For the duration, Keras' cast (TensorFlow backend) of a float64 value to
    float32 casts it to float64 instead (module docstring), and counts the code
    that asked for it in ``sites`` ("file.py:line" -> calls). Other casts, and
    casts outside a float64 call, are Keras' own."""
    _install_cast()
    token = _KEPT.set(sites)
    try:
        yield sites
    finally:
        _KEPT.reset(token)


def _install_cast() -> None:
    """Put a cast that reads ``_KEPT`` in place of the TensorFlow backend's
    ``cast``, once per process; it is Keras' own wherever ``_KEPT`` is unset."""
    from keras.src.backend.tensorflow import core

    if getattr(core.cast, "_gradcli_original", None) is None:
        original = core.cast

        def cast(x, dtype):
            sites = _KEPT.get()
            if sites is not None and getattr(x, "dtype", None) == "float64" and _standard(dtype) == "float32":
                site = _caller()
                sites[site] = sites.get(site, 0) + 1
                dtype = "float64"  # a tensor as the cast returns one (a variable read, a numpy array converted)
            return original(x, dtype)

        cast._gradcli_original = original
        core.cast = cast


def _standard(dtype) -> str:
    from keras.src.backend import standardize_dtype

    try:
        return standardize_dtype(dtype)
    except Exception:  # noqa: BLE001 - not a dtype Keras names: Keras' cast says so
        return ""


def _caller() -> str:
    """"file.py:line" of the first frame outside Keras' ops and backend: the
    code that asked for the cast."""
    keras_parts = (os.sep.join(("keras", "src", "ops")), os.sep.join(("keras", "src", "backend")))
    frame = sys._getframe(2)
    while frame is not None and any(part in frame.f_code.co_filename for part in keras_parts):
        frame = frame.f_back
    if frame is None:
        return "keras"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def stateless_float64_call(layer, trainable: list, frozen: list, *args, **kwargs):
    """``layer.stateless_call(trainable, frozen, *args, **kwargs)`` computed in
    float64 by the layer itself (module docstring): (outputs, the frozen
    variables' values after the call)."""
    import keras

    mapping = list(zip(layer.trainable_variables, trainable)) + list(zip(layer.non_trainable_variables, frozen))
    with float64_policies(layer):
        scope = keras.StatelessScope(state_mapping=mapping)
        # The scope casts each value to its variable's dtype (float32): the
        # float64 values must reach the layers as they are.
        scope.state_mapping.update({id(v): value for v, value in mapping})
        with scope:
            outputs = layer.call(*args, **kwargs)
        return outputs, [scope.get_current_value(v) for v in layer.non_trainable_variables]
