"""A unit's local function as a ``Model`` (``layer_model``): its floating
inputs and trainable weights -> <c, its outputs>, c a fixed random unit
cotangent (the package docstring gives the reasons), through the signature's
trace, the layer's stateless call, or a tf.Module's ``__call__`` body; and the
user's own layer paired as its own call for ``verdicts.same_function``.
"""

from __future__ import annotations

import numpy as np

from gradcli.analyses.layers.traces import Traced, call_method, call_parts, contracted, mask_context, with_masks
from gradcli.analyses.layers.units import PROJECTED, LayerCall, point_tensors
from gradcli.errors import GradcliError
from gradcli.model.keras_float64 import stateless


#: No element of a unit's outputs weighs more than this many times their
#: median magnitude in <c, outputs> (``outlier_weights``).
OUTLIER_FACTOR = 1024.0


def outlier_weights(outputs: list) -> list[np.ndarray]:
    """Per output element, the weight of its cotangent entry: 1, or F M / |y|
    for an element larger than F M (F = ``OUTLIER_FACTOR``, M the median
    magnitude of the unit's nonzero finite output elements; a non-finite one
    keeps 1).

    Rule: the scalar's round-off, which bounds what a finite difference of it
    resolves (``numerics.difference_rule``), is eps times its terms' sizes.
    An element far larger than the others (an attention bias holding its mask
    as -1e9, as keras-hub's T5 layers return it beside activations of size 1)
    would set it alone: every input that does not move that element, whose
    changes are exactly 0 there, was then inconclusive or checked to a few
    percent (a T5 decoder layer's query kernel: error estimate 0.13 against
    derivatives of 2e-5). Capped at F M, no term is more than 1024 times the
    typical one, so the round-off stays within 1024 eps of the typical term's
    (4e-8 of it at the step rule's h); an element's derivative still counts,
    at that weight. Where no element exceeds F M, the weights are all 1 and c
    is what it was."""
    values = [np.abs(np.asarray(y, np.float64)) for y in outputs]
    sizes = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values]) if values else np.zeros(0)
    if not sizes.size:
        return [np.ones(v.shape) for v in values]
    cap = OUTLIER_FACTOR * float(np.median(sizes))
    with np.errstate(divide="ignore", invalid="ignore"):
        return [np.where(np.isfinite(v) & (v > cap), cap / v, 1.0) for v in values]


def layer_model(parent, call: LayerCall, seed: int = 0, traced: Traced | None = None):
    """The unit's local function as a ``Model``: floating tensors of the call
    (inputs) and the unit's trainable weights -> <c, its outputs> (module
    docstring). With ``traced``, the function is the signature's traced one;
    else the unit's layer is called eagerly (``check_model`` traces it itself,
    and its culprit search reads the ops of that trace)."""
    import tensorflow as tf

    from gradcli.model.calling import OwnCall
    from gradcli.model.loading import Model, host_array

    layer, own, tree = call.layer, call.own, call.tree
    structure, leaves, inputs, floating = call_parts(call)
    if not floating:
        raise GradcliError(f"layer {call.path} has no floating-point output to differentiate")
    point = {inputs[i]: np.asarray(leaves[i]) for i in inputs}
    weights = list(call.names)
    point.update({n: np.asarray(v) for n, v in zip(weights, call.trainable)})
    frozen = list(call.non_trainable)

    def rebuild(values):
        filled = [values[inputs[i]] if i in inputs else leaf for i, leaf in enumerate(leaves)]
        args, kwargs = tf.nest.pack_sequence_as(structure, with_masks(filled, call.input_masks))
        return args, kwargs

    outputs = tf.nest.flatten(call.outputs)
    rng = np.random.default_rng([seed, call.order])
    cotangents = [rng.standard_normal(tuple(outputs[i].shape)) for i in floating]
    cotangents = [c * w for c, w in zip(cotangents, outlier_weights([outputs[i] for i in floating]))]
    # The emitted masks' entries after the outputs' (``traces.contracted``).
    cotangents += [rng.standard_normal(shape) for shape in call.emitted]
    norm = np.sqrt(sum(float(np.sum(c * c)) for c in cotangents)) or 1.0
    cotangents = [c / norm for c in cotangents]  # a unit vector (the package docstring)

    context = mask_context(call)

    def project(out, args, own: bool = False) -> dict:
        """<c, output>: the layer's floating outputs (and masks) contracted with the cotangents."""
        return {PROJECTED: contracted(layer, out, args, context, floating, cotangents, own)}

    wrt = list(inputs.values()) + weights
    if traced is not None:
        function = traced.function(wrt, [tf.convert_to_tensor(f) for f in frozen],
                                   [tf.constant(c) for c in cotangents])
    elif tree is not None:
        # A tf.Module: its weights substituted as the whole model's are
        # (``model.variables``), its ``__call__``'s Python body run.
        substitute, body = tree.weights.only(weights), call_method(layer)

        def function(values: dict) -> dict:
            args, kwargs = rebuild(values)
            with substitute.substituted(values):
                return project(body(layer, *args, **kwargs), args)
    else:
        def function(values: dict) -> dict:
            args, kwargs = rebuild(values)
            out, _ = stateless(layer, call.policies, [values[n] for n in weights], frozen, *args, **kwargs)
            return project(out, args)

    own_call = None
    if own is not None:
        def own_function(data: dict) -> dict:
            args, kwargs = rebuild(data)
            return project(own(*args, **kwargs), args, own=True)

        own_variables = (
            [tree.weights.slots[n][2] for n in weights] if tree is not None else own.trainable_variables
        )
        own_call = OwnCall(
            call=own_function,
            variables=dict(zip(weights, own_variables)),
            description=f"{own.name}({', '.join(inputs.values())})",
        )
    native = {n: np.dtype("float32") for n in point}
    if own is not None:
        native.update({n: np.dtype(getattr(v.dtype, "as_numpy_dtype", v.dtype)) for n, v in zip(weights, own_variables)})
    from gradcli.numerics.held import hold

    local = Model(
        name=f"{parent.name} :: {call.path}", path=parent.path, function=function, point=hold(point),
        wrt=wrt, native_dtypes=native, kind="keras",
        module=parent.module, weights=weights, own_call=own_call, unit=True,
    )
    local.outputs = {n: host_array(t) for n, t in function(point_tensors(local, point)).items()}
    if own_call is None:
        local.notes.append("the user's own layer could not be paired with the checked one")
    return local
