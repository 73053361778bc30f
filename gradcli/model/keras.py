"""A Keras ``model`` in a model file, with its ``loss`` and ``training`` mode.

The model-file contract for Keras (README, "Model files"):

* ``model``: a Keras model or layer. It becomes a function of its trainable
  weights (named by path, ``dense/kernel``) and its data inputs
  (``loading._keras_model``).
* ``loss`` (optional): a callable ``loss(y_true, y_pred)``, a
  ``keras.losses.Loss`` object or a Keras loss name (``"mse"``). The checked
  function is then the loss of the model on the batch in ``inputs``: the input
  named ``y`` holds the targets, every other input is model data (``x``). Its
  one output, ``loss``, is differentiated with respect to every trainable
  weight (and the data, if ``wrt`` names them).
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

import numpy as np

from gradcli.errors import ModelError
from gradcli.model.paths import relative_path

#: The input holding the targets y_true when the file defines a ``loss``.
TARGET = "y"
#: Name of the checked function's one output when the file defines a ``loss``.
LOSS_OUTPUT = "loss"


def keras_file_model(layer, module, data: dict, display: str, path: str, float64: bool):
    """The Model of a model file whose ``model`` is Keras (see the module docstring)."""
    from gradcli.model.loading import _keras_model

    training = getattr(module, "training", False)
    if not isinstance(training, bool):
        raise ModelError(f"{relative_path(path)}: `training` must be True or False, got {training!r}")
    loss = getattr(module, "loss", None)
    if loss is None:
        model = _keras_model(layer, data, display, path, float64, training=training)
    else:
        if TARGET not in data:
            raise ModelError(
                f"{relative_path(path)}: a `loss` needs the targets as input {TARGET!r} in "
                f"`inputs` (inputs: {', '.join(data) or 'none'})"
            )
        loss_fn, described = _loss_function(loss, path)
        features = {n: v for n, v in data.items() if n != TARGET}
        model = _keras_model(layer, features, display, path, float64, training=training)
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
    from gradcli.tf_import import import_tensorflow

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
    from gradcli.tf_import import import_tensorflow

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
    names = ", ".join(sorted({sub.name for sub in inner}))
    if training:
        return [f"layers {names} ran with training=True (training mode, set by `training` in the model file)"]
    return [
        f"layers {names} ran with training=False (inference mode); set `training = True` "
        "in the model file to check training mode"
    ]
