"""A SavedModel folder (``tf.saved_model.save`` output) as a :class:`Model`.

MODEL is ``DIR`` or ``DIR:NAME``: NAME is a signature key (default
``serving_default``) or a restored function attribute such as ``__call__``
(used when the folder has no signatures and the function was traced once).

A loaded SavedModel function reads its variables through captured resource
handles, so neither finite differences (which evaluate a batch of perturbed
weights in one ``tf.vectorized_map``) nor a tape watching a weight tensor could
vary them. The function is therefore made pure: its graph is frozen
(``convert_variables_to_constants_v2`` inlines the nested function calls and
turns every variable read into a constant) and imported again with the
constant of each trainable variable replaced by an input. The result maps
(weights by path, data inputs) to the named outputs, traces, vectorises and
differentiates like any model function, and the loaded variables are never
assigned. Weights are named by their own names when those are distinct (a
Keras export: ``dense/kernel``), else by their attribute path in the saved
object (``w``, ``inner/scale``), breadth first, so the shortest path names a
variable reachable by several.
"""

from __future__ import annotations


import numpy as np

from gradcli.errors import ModelError, UsageError
from gradcli.model.calling import OwnCall
from gradcli.model.core import Model, first_line, is_floating, normalize_outputs, weight_name, weight_names
from gradcli.model.paths import SAVED_MODEL_FILE, is_saved_model, relative_path  # noqa: F401 - re-exported
from gradcli.model.values import check_unknown
from gradcli.model.variables import variables_by_path
from gradcli.tf_import import import_tensorflow

DEFAULT_SIGNATURE = "serving_default"


def load_saved_model(path: str, entry: str | None, data: dict[str, np.ndarray]):
    """Load ``path`` (a SavedModel folder) and pick its function ``entry``.

    ``data`` maps the function's input names to values (the ``data`` option); a
    single-input function accepts any one name. Returns a Model in the
    function's own dtypes (a graph's dtypes are fixed: promoting its inputs
    would not change what it computes).
    """
    tf = import_tensorflow()
    display = relative_path(path) + (f":{entry}" if entry else "")
    try:
        loaded = tf.saved_model.load(path)
    except Exception as exc:  # TensorFlow raises many types for unreadable folders
        raise ModelError(
            f"{display}: cannot load the SavedModel - {type(exc).__name__}: {first_line(exc)}"
        ) from None
    function = _pick_function(loaded, entry, display)
    specs = _input_specs(function)
    values = _fit_data(data, specs, display)
    variables = variables_by_path(loaded)
    captured = _captured_variables(function, variables)
    pure, output_names = _pure_function(function, specs, captured, display)
    weight_names = list(captured)

    def model_function(tensors: dict) -> dict:
        args = [tensors[n] for n in specs] + [tensors[n] for n in weight_names]
        outputs = pure(*args)
        return normalize_outputs(dict(zip(output_names, outputs)) if output_names else outputs)

    point = {n: np.asarray(v.numpy()) for n, (v, _) in captured.items()}
    point.update(values)
    notes = []
    floats = sorted({str(v.dtype) for v in point.values() if is_floating(v)} - {"float64"})
    if floats:
        notes.append(
            f"a SavedModel's graph has fixed dtypes: checking in {', '.join(floats)} with "
            "steps and tolerances for that dtype"
        )
    def own_call(tensors: dict) -> dict:  # the loaded function itself, reading its variables
        outputs = function(**{n: tensors[n] for n in specs})
        return normalize_outputs(outputs)

    return Model(
        name=display, path=path, function=model_function, point=point, wrt=[],
        native_dtypes={}, kind="savedmodel", notes=notes, weights=weight_names,
        runs_in_float64=False,
        own_call=OwnCall(
            call=own_call, variables={n: v for n, (v, _) in captured.items()},
            description=f"the loaded function({', '.join(specs)})",
        ),
    )


def _pick_function(loaded, entry: str | None, display: str):
    """The concrete function named ``entry``: a signature key, else an attribute."""
    signatures = dict(getattr(loaded, "signatures", {}) or {})
    name = entry or (DEFAULT_SIGNATURE if DEFAULT_SIGNATURE in signatures else "__call__")
    if name in signatures:
        return signatures[name]
    restored = getattr(loaded, name, None)
    concrete = list(getattr(restored, "concrete_functions", None) or [])
    if len(concrete) == 1:
        return concrete[0]
    known = sorted(signatures) + [
        a for a in ("__call__",) if getattr(getattr(loaded, a, None), "concrete_functions", None)
    ]
    if len(concrete) > 1:
        raise UsageError(
            f"{display}: {name} was saved with {len(concrete)} input signatures; save one "
            f"(input_signature=...) or pick a signature (known: {', '.join(known) or 'none'})"
        )
    raise UsageError(
        f"{display}: no signature or function {name!r} (known: {', '.join(known) or 'none'})"
    )


def _input_specs(function) -> dict:
    """Input name -> TensorSpec, in the order of the function's flat inputs."""
    tf = import_tensorflow()

    flat = tf.nest.flatten(function.structured_input_signature)
    return {(spec.name or f"arg{i}"): spec for i, spec in enumerate(flat)}


def _fit_data(data: dict, specs: dict, display: str) -> dict[str, np.ndarray]:
    """The ``data`` option's values checked against the input specs (shape, dtype)."""
    described = ", ".join(f"{n} {_shape(s.shape)} {s.dtype.name}" for n, s in specs.items())
    if not data:
        raise UsageError(f"{display}: a SavedModel needs its data as {{@input}} NAME=VALUE (inputs: {described})")
    if len(specs) == 1 and len(data) == 1:
        data = {next(iter(specs)): next(iter(data.values()))}
    check_unknown(data, specs, "input for {@input}")
    missing = [n for n in specs if n not in data]
    if missing:
        raise UsageError(f"{display}: no {{@input}} for {', '.join(missing)} (inputs: {described})")
    values = {}
    for name, spec in specs.items():
        value = np.asarray(data[name])
        if not spec.shape.is_compatible_with(value.shape):
            raise UsageError(
                f"{{@input}} {name} has shape {list(value.shape)}, the SavedModel expects {_shape(spec.shape)}"
            )
        dtype = np.dtype(spec.dtype.as_numpy_dtype)
        if not np.issubdtype(dtype, np.floating) and np.issubdtype(value.dtype, np.floating):
            if not np.all(value == np.round(value)):
                raise UsageError(f"{{@input}} {name} must hold integers ({spec.dtype.name})")
        values[name] = value.astype(dtype)
    return values


def _shape(shape) -> str:
    if shape.rank is None:
        return "any shape"
    return "[" + ", ".join("None" if d is None else str(d) for d in shape) + "]"


def _captured_variables(function, variables: dict) -> dict:
    """Trainable variables the function reads: name -> (variable, its placeholder's name).

    A variable is named by its own name when those are distinct and not
    TensorFlow's default ``Variable`` (a Keras export names them by layer,
    ``dense/kernel``, as a ``.keras`` file does), else by attribute path: the
    naming rule of every loader (``core.weight_names``), the own names as the
    short ones.
    """
    by_handle = {id(v.handle): (path, v) for path, _, _, v in variables.values()}
    found = []
    for external, internal in function.graph.captures:
        match = by_handle.get(id(external))
        if match is not None and match[1].trainable:
            found.append((match[0], match[1], internal.name))
    paths = [path for path, _, _ in found]
    own = [weight_name(v.name.split(":")[0]) for _, v, _ in found]
    default = any(n.split("_")[0] == "Variable" for n in own)
    names = weight_names(paths, paths if default else own)
    return {name: (variable, placeholder) for name, (_, variable, placeholder) in zip(names, found)}


def _pure_function(function, specs: dict, captured: dict, display: str):
    """``(*data, *weights) -> flat outputs``, and the output names (None: not a dict)."""
    from tensorflow.python.framework import convert_to_constants  # no public equivalent

    tf = import_tensorflow()
    try:
        frozen, graph_def = convert_to_constants.convert_variables_to_constants_v2_as_graph(function)
    except Exception as exc:
        raise ModelError(
            f"{display}: cannot make the SavedModel function pure in its weights - "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None
    custom = [n.name for n in graph_def.node if "_gradient_op_type" in n.attr]
    if custom:
        # A saved tf.custom_gradient's gradient function belongs to the original
        # trace and cannot serve the re-imported graph; dropping it would check
        # the derivative of its forward ops instead, which could hide its bug.
        raise ModelError(
            f"{display}: the SavedModel uses tf.custom_gradient (op {custom[0]}); its saved "
            "gradient cannot be checked by weight: check the model's Python source instead"
        )
    input_names = [t.name for t in frozen.inputs]
    weight_names = [placeholder for _, placeholder in captured.values()]
    output_names = [t.name for t in frozen.outputs]

    def body(*args):
        feeds = dict(zip(input_names + weight_names, args))
        return tf.graph_util.import_graph_def(
            graph_def, input_map=feeds, return_elements=output_names, name=""
        )

    arg_specs = list(specs.values()) + [
        tf.TensorSpec(v.shape, v.dtype) for v, _ in captured.values()
    ]
    pure = tf.compat.v1.wrap_function(body, arg_specs)
    structured = function.structured_outputs
    names = sorted(structured) if isinstance(structured, dict) else None
    return pure, names
