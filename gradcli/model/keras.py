"""A Keras model as a :class:`~gradcli.model.core.Model`: from a model file
(with its ``loss`` and ``training`` mode) or a saved ``.keras`` file.

Any Keras model becomes a pure function of its trainable weights (named by
path, ``dense/kernel``) and its data inputs through ``stateless_call``
(``keras_model``), computed in float64 by a rebuilt copy when it can be
(``keras_float64``). A ``.keras`` file is loaded in safe mode
(``load_keras_file``).

The model-file contract for Keras (README, "Model files"):

* ``model``: a Keras model or layer.
* ``loss`` (optional): a callable ``loss(y_true, y_pred)``, a
  ``keras.losses.Loss`` object or a Keras loss name (``"mse"``). The checked
  function is then the loss of the model on the batch in ``inputs``: the input
  named ``y`` holds the targets, every other input is model data (``x``). Its
  one output, ``loss``, is differentiated with respect to the data and every
  trainable weight, never the targets unless ``wrt`` names them.
* ``training`` (optional, default False): the value of the ``training``
  argument of layers that take one (Dropout, BatchNormalization). The report
  says which mode ran whenever such a layer exists.

Reduction rule: a loss that returns one value per sample is averaged over all
its elements, which is what ``model.compile(loss=...)`` does by default
(``sum_over_batch_size``), so the checked number is the loss training
minimises. A ``Loss`` object is reduced by its own ``reduction``.

Precision rule: a ``Loss`` object's ``__call__`` converts both arguments to
the loss's dtype (float32 unless built otherwise), which would round a float64
check to float32; gradcli calls its ``call`` method (the per-sample values,
no conversion) and applies the reduction itself, so the loss is computed in
the dtype of the predictions.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np

from gradcli.errors import ModelError, UsageError
from gradcli.model.calling import OwnCall
from gradcli.model.core import Model, first_line, is_floating, name_list, normalize_outputs, weight_names, where_raised
from gradcli.model.keras_float64 import float64_clone, stateless
from gradcli.model.paths import relative_path
from gradcli.model.values import check_unknown, fit_value
from gradcli.tf_import import import_tensorflow

#: The input holding the targets y_true when the file defines a ``loss``.
TARGET = "y"
#: Name of the checked function's one output when the file defines a ``loss``.
LOSS_OUTPUT = "loss"


def keras_file_model(layer, module, data: dict, display: str, path: str, float64: bool):
    """The Model of a model file whose ``model`` is Keras (see the module docstring)."""
    training = getattr(module, "training", False)
    if not isinstance(training, bool):
        raise ModelError(f"{relative_path(path)}: `training` must be True or False, got {training!r}")
    loss = getattr(module, "loss", None)
    if loss is None:
        model = keras_model(layer, data, display, path, float64, training=training)
    else:
        if TARGET not in data:
            raise ModelError(
                f"{relative_path(path)}: a `loss` needs the targets as input {TARGET!r} in "
                f"`inputs` (inputs: {', '.join(data) or 'none'})"
            )
        loss_fn, described = _loss_function(loss, path)
        features = {n: v for n, v in data.items() if n != TARGET}
        model = keras_model(layer, features, display, path, float64, training=training)
        _add_loss(model, data[TARGET], loss_fn)
        model.notes.append(f"checking the loss {described} on the batch in `inputs`")
    return model


def _loss_function(loss, path: str):
    """``loss`` as ``fn(y_true, y_pred) -> scalar`` in the dtype of y_pred, and its name."""
    import keras

    if isinstance(loss, str):
        try:
            resolved = keras.losses.get(loss)
        except Exception:  # Keras raises ValueError for unknown names
            resolved = None
        if resolved is None:
            raise ModelError(f"{relative_path(path)}: `loss` {loss!r} is not a Keras loss name")
        loss = resolved
    if isinstance(loss, type) and issubclass(loss, keras.losses.Loss):
        loss = loss()
    if isinstance(loss, keras.losses.Loss):
        reduction, per_sample, name = loss.reduction, loss.call, type(loss).__name__
    elif callable(loss):
        reduction, per_sample = "sum_over_batch_size", loss
        name = getattr(loss, "__name__", type(loss).__name__)
    else:
        raise ModelError(
            f"{relative_path(path)}: `loss` is a {type(loss).__name__}, not a callable, a "
            "keras.losses.Loss or a Keras loss name"
        )

    def function(y_true, y_pred):
        return reduce(per_sample(y_true, y_pred), reduction)

    how = {None: "not reduced", "none": "not reduced", "sum": "summed"}.get(
        reduction, "averaged over its elements (Keras's sum_over_batch_size)"
    )
    return function, f"{name}(y, model(x)), {how},"


def reduce(values, reduction: str | None):
    """Keras's reductions: ``sum``; ``none``; else the mean over every element."""
    tf = import_tensorflow()
    values = tf.convert_to_tensor(values)
    if reduction in (None, "none") or values.shape.rank == 0:
        return values
    if reduction == "sum":
        return tf.reduce_sum(values)
    return tf.reduce_mean(values)


def _add_loss(model, targets: np.ndarray, loss_fn) -> None:
    """Turn ``model`` (outputs: the predictions) into the loss of its predictions
    against ``targets``; the targets become the input ``y``."""
    tf = import_tensorflow()
    predict = model.function

    def function(values: dict) -> dict:
        outputs = predict(values)
        predictions = outputs["output"] if len(outputs) == 1 else list(outputs.values())
        y_pred = tf.nest.flatten(predictions)[0]
        y_true = tf.cast(values[TARGET], y_pred.dtype)
        return {LOSS_OUTPUT: tf.convert_to_tensor(loss_fn(y_true, predictions))}

    model.function = function
    model.point[TARGET] = np.asarray(targets)
    model.targets = [TARGET]
    own = model.own_call
    if own is not None:
        predict_own = own.call

        def own_loss(values: dict) -> dict:
            outputs = predict_own({n: v for n, v in values.items() if n != TARGET})
            predictions = outputs["output"] if len(outputs) == 1 else list(outputs.values())
            y_pred = tf.nest.flatten(predictions)[0]
            y_true = tf.cast(values[TARGET], y_pred.dtype)
            return {LOSS_OUTPUT: tf.convert_to_tensor(loss_fn(y_true, predictions))}

        own.call, own.description = own_loss, f"loss(y, {own.description})"


#: Built-in Keras layers that compute differently in training (Keras 3 also gives
#: Dense and others a ``training`` argument they ignore, so the argument alone
#: does not tell); layers defined outside Keras count when they take the argument.
TRAINING_LAYERS = ("Dropout", "AlphaDropout", "GaussianDropout", "GaussianNoise", "BatchNormalization")


def _uses_training(sub) -> bool:
    import keras

    if isinstance(sub, keras.Model):  # containers pass the flag on to their layers
        return False
    if isinstance(sub, tuple(getattr(keras.layers, n) for n in TRAINING_LAYERS)):
        return True
    user_defined = not type(sub).__module__.startswith("keras")
    return user_defined and getattr(sub, "_call_has_training_arg", False)


def training_notes(layer, training: bool) -> list[str]:
    """Which mode the layers that use ``training`` ran in, if there are any."""
    try:
        inner = [sub for sub in layer._flatten_layers(include_self=False) if _uses_training(sub)]
    except Exception:  # not a Keras 3 layer tree: nothing to report
        return []
    if not inner:
        return []
    names = name_list(sorted({sub.name for sub in inner}))
    if training:
        return [f"layers {names} ran with training=True (training mode, set by `training` in the model file)"]
    return [
        f"layers {names} ran with training=False (inference mode); set `training = True` "
        "in the model file to check training mode"
    ]


def keras_model(
    layer, data: dict, display: str, path: str, float64: bool, training: bool = False
) -> Model:
    """Wrap a Keras model as a pure function of (weights, data inputs); layers
    with a ``training`` argument get ``training``.

    Keras casts inputs to each layer's compute dtype, so float64 values passed
    to a float32 model would be silently computed in float32. For float64 we
    clone the model with every layer's dtype set to float64 and call the clone.
    """
    import keras

    if not data:
        raise ModelError(f"{display}: a Keras model needs `inputs` (its data inputs)")
    data_names = list(data)
    data_args = lambda values: (  # noqa: E731 - tiny adapter
        values[data_names[0]] if len(data_names) == 1 else {n: values[n] for n in data_names}
    )
    if not layer.built:
        try:
            layer(data_args({n: np.asarray(v) for n, v in data.items()}))
        except Exception as exc:
            raise ModelError(
                f"{where_raised(exc, path)}: building the Keras model raised "
                f"{type(exc).__name__}: {first_line(exc)}"
            ) from None
    own_dtypes = _keras_converts(layer, data)
    variables = list(layer.trainable_variables)  # one entry per variable object, shared ones too
    weights = dict(zip(weight_names([v.path for v in variables]), variables))
    frozen = list(layer.non_trainable_variables)
    notes = training_notes(layer, training)
    runner, switched = layer, False
    if float64:
        try:
            runner = float64_clone(layer, data_args({n: np.asarray(v) for n, v in data.items()}))
        except Exception as exc:
            switched = True
            notes.append(
                f"could not rebuild the Keras model in float64 ({type(exc).__name__}: "
                f"{first_line(exc)[:160]}); its layers compute in float64 by switching their dtype "
                "policies for the check"
            )
    names = list(weights)
    # ``Layer.__call__`` drops ``training`` for a ``call`` without it, but
    # ``stateless_call`` passes it on as it is (a subclassed model whose
    # ``call(self, x)`` takes none would raise).
    mode = {"training": training} if getattr(layer, "_call_has_training_arg", True) else {}

    #: Where the model's code cast a float64 value to float32 in a float64
    #: call, kept float64 (``keras_float64.float32_casts_kept``): the note
    #: ``dtype_choice`` adds names them.
    kept_casts: dict = {}

    def function(values: dict) -> dict:
        trainable = [values[n] for n in names]
        # The weights' dtype, else (a layer without weights) the data's.
        dtype = next((values[n].dtype for n in names + data_names if values[n].dtype.is_floating), None)
        fixed = [v.value if dtype is None else _cast(v.value, dtype) for v in frozen]
        # The float64 clone (or the model with float64 policies) for float64
        # weights; the model itself for its own dtype (``dtype_choice.settle_dtype``
        # falls back to it when float64 does not run).
        native = getattr(dtype, "name", "float64") != "float64"
        active, by_policies = (layer, False) if native else (runner, switched)
        out, _ = stateless(active, by_policies, trainable, fixed, data_args(values), kept=kept_casts, **mode)
        return normalize_outputs(out)

    function.float32_casts = kept_casts

    point = {n: np.asarray(v.numpy()) for n, v in weights.items()}
    point.update(data)
    own_call = OwnCall(  # the original layer, called as training code calls it
        call=lambda values: normalize_outputs(layer(data_args(values), training=training)),
        variables=dict(weights),
        description=f"{layer.name}({', '.join(data_names)}, training={training})",
    )
    model = Model(
        name=display,
        path=path,
        function=function,
        point=point,
        wrt=[],
        native_dtypes={},
        kind="keras",
        notes=notes,
        weights=names,
        runs_in_float64=runner is not layer or switched,
        own_call=own_call,
        float64_by_policies=switched,
        pure_call=not switched and not training,
        own_dtypes=own_dtypes,
    )
    return model


def _keras_converts(layer, data: dict) -> dict:
    """The floating dtype Keras converts each floating data input to when the
    model is called, where it differs from the data's own: a functional model's
    ``Input`` dtype, else (a layer given as the model) the layer's
    ``input_dtype`` when it autocasts. That is the model's own dtype for the
    input, the one ``dtype_choice.settle_dtype`` falls back to when float64
    does not run: float64 data given to a weightless float32 layer without a float64
    kernel (``AveragePooling3D`` on CPU) had none and stopped with exit 3."""
    inputs = _built_inputs(layer)
    targets = {}
    if len(inputs) == len(data):
        targets = {n: str(t.dtype) for n, t in zip(data, inputs)}
    elif len(data) == 1 and getattr(layer, "autocast", False) and getattr(layer, "_convert_input_args", False):
        targets = {next(iter(data)): str(layer.input_dtype)}
    own = {}
    for name, value in data.items():
        target = targets.get(name)
        value = np.asarray(value)
        if target is None or not is_floating(value) or value.dtype == target:
            continue
        if np.issubdtype(np.dtype(target), np.floating):
            own[name] = np.dtype(target)
    return own


def _built_inputs(layer) -> list:
    try:
        return list(layer.inputs or [])
    except Exception:  # a layer or subclassed model that was never called symbolically
        return []


def load_keras_file(
    path: str, data: dict[str, np.ndarray], float64: bool, loss: str | None = None,
) -> Model:
    """A saved Keras model, loaded in safe mode (no arbitrary code from the file).

    ``data`` maps the model's input names (``model.inputs[i].name``) to values;
    a single-input model accepts any one name. Integer data for a floating
    input is converted to that input's dtype. With ``loss`` (``"compiled"``:
    the loss the model was compiled with, else a Keras loss name) the checked
    function is that loss on (``x``, ``y``): ``data["y"]`` holds the targets,
    the rest is model data, and its one output ``loss`` is differentiated with
    respect to the weights (the reduction and precision rules of the module
    docstring). Keras's warnings while loading are silenced (``quiet_keras``).
    """
    import keras

    if not os.path.isfile(path):
        raise UsageError(f"no such model file: {path}")
    try:
        with quiet_keras():
            layer = keras.saving.load_model(path, safe_mode=True)
    except Exception as exc:
        raise ModelError(
            f"{relative_path(path)}: cannot load the Keras model (safe mode) - "
            f"{type(exc).__name__}: {first_line(exc)}{_registration_hint(exc)}"
        ) from None
    specs = {t.name: t for t in getattr(layer, "inputs", None) or []}
    targets = None
    if loss is not None:
        if loss != COMPILED and not _is_loss_name(loss):
            raise UsageError(f"{{@loss}} {loss!r}: neither 'compiled' nor a Keras loss name (mse, ...)")
        if TARGET not in data:
            raise UsageError(
                f"{{@loss}} needs the targets as {{@input}} {TARGET}=VALUE beside the model's data "
                f"(given: {', '.join(data) or 'none'})"
            )
        data = dict(data)
        targets = _target_array(data.pop(TARGET))
    if not data:
        known = ", ".join(specs) or "see the model's inputs"
        raise UsageError(
            f"{relative_path(path)}: a .keras model needs its data as {{@input}} NAME=VALUE (inputs: {known})"
        )
    if specs and not (len(specs) == 1 and len(data) == 1):
        check_unknown(data, specs, "input for {@input}")
    values = {}
    for name, value in data.items():
        spec = specs[name] if name in specs else next(iter(specs.values()), None)
        dtype = np.dtype(str(spec.dtype)) if spec is not None else np.dtype("float32")
        value = np.asarray(value)
        if not (is_floating(value) and np.issubdtype(dtype, np.floating)):
            # The rules of the ``overrides`` option (``fit_value``): integers may become floats,
            # booleans never (true is not the number 1.0), no fractions for integers.
            value = fit_value(value, np.zeros(value.shape, dtype), f"{{@input}} {name}")
        values[name] = value
    model = keras_model(layer, values, relative_path(path), path, float64)
    if loss is not None:
        chosen = _compiled_loss(layer, path) if loss == COMPILED else loss
        loss_fn, described = _loss_function(chosen, path)
        _add_loss(model, targets, loss_fn)
        origin = "the compiled loss" if loss == COMPILED else "the loss"
        model.notes.append(f"checking {origin} {described} on the data in {{@input}}")
        if getattr(layer, "losses", None):
            model.notes.append(
                "the layers' own losses (regularizers, add_loss) are not part of the checked loss"
            )
    return model


#: ``loss="compiled"``: the loss the saved model was compiled with.
COMPILED = "compiled"


def _compiled_loss(layer, path: str):
    """The loss ``layer`` was compiled with (``model.compile(loss=...)``, kept
    in the .keras file): one loss, or a list or dict holding one."""
    loss = getattr(layer, "loss", None)
    if isinstance(loss, (list, tuple)) and len(loss) == 1:
        loss = loss[0]
    if isinstance(loss, dict) and len(loss) == 1:
        loss = next(iter(loss.values()))
    if loss is None:
        raise UsageError(
            f"{{@loss}} compiled: {relative_path(path)} was saved without a compiled loss "
            "(compile the model before saving it, or give a Keras loss name such as mse)"
        )
    if isinstance(loss, (list, tuple, dict)):
        raise UsageError(
            f"{{@loss}} compiled: {relative_path(path)} has {len(loss)} compiled losses (one per "
            "output); check one output's loss from a model file instead"
        )
    return loss


def _is_loss_name(name: str) -> bool:
    import keras

    try:
        return keras.losses.get(name) is not None
    except Exception:  # Keras raises ValueError for unknown names
        return False


def _target_array(value) -> np.ndarray:
    """The targets ``y`` as numbers: booleans and text refused (``fit_value``)."""
    value = np.asarray(value)
    return value if is_floating(value) else fit_value(value, np.zeros(value.shape), f"{{@input}} {TARGET}")


#: Words of Keras's errors for a class it cannot find in its registry.
UNREGISTERED = ("could not be deserialized", "Could not locate class", "Unknown layer", "Unknown object")


def _registration_hint(exc: BaseException) -> str:
    """For an error about a class Keras cannot find: how to make it known."""
    if not any(word in str(exc) for word in UNREGISTERED):
        return ""
    return (
        " (a custom class the file needs is not registered in this process: use {@imports} MODULE "
        "to import the module that registers it)"
    )


@contextlib.contextmanager
def quiet_keras():
    """Silence Keras's and absl's warnings (a compiled model's optimizer state,
    "Skipping variable loading for optimizer ...") while a saved model loads:
    stderr carries gradcli's own lines only. The warnings filters and the
    absl, TensorFlow and Keras logging levels are restored afterwards; errors
    still raise."""
    import logging

    loggers = [logging.getLogger(name) for name in ("absl", "tensorflow", "keras")]
    levels = [logger.level for logger in loggers]
    try:
        from absl import logging as absl_logging
    except ImportError:  # absl comes with TensorFlow; without it there is nothing to quiet
        absl_logging = None
    verbosity = absl_logging.get_verbosity() if absl_logging is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        if absl_logging is not None:
            absl_logging.set_verbosity(absl_logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)
            if absl_logging is not None:
                absl_logging.set_verbosity(verbosity)


def _cast(value, dtype):
    tf = import_tensorflow()

    return tf.cast(value, dtype) if value.dtype.is_floating else value
