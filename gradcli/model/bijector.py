"""A bijector as a model: a ``tfp.bijectors.Bijector``, or any object with
``forward``, ``inverse``, ``forward_log_det_jacobian`` and
``inverse_log_det_jacobian`` (``is_bijector``).

The model file's ``inputs`` give one floating input x (``[n]`` or
``[batch, n]``). The model is a function of x and of a second input y, set at
load to forward(x) (``second_input``: named ``y``, or ``x`` when the file's
input is itself named ``y``; setting y's value moves it), with four outputs
(``OUTPUTS``): ``forward`` = forward(x), ``inverse`` = inverse(y) and the two
log-dets, ``forward_log_det_jacobian(x)`` and ``inverse_log_det_jacobian(y)``,
taken with ``event_ndims=1`` (one value per example of R^n, as
``gradcli logdet`` reads them), or the bijector's own least event rank where it
is higher (``event_ndims``: a matrix bijector such as CholeskyOuterProduct has
no log-det per vector, and TensorFlow Probability raises at 1); a method
without that parameter is called with the value alone. So ``gradcli check`` checks both directions' gradients, and
those of the log-dets a flow's loss is made of: forward by x, inverse by y
(the pairs across, x to ``inverse`` and y to ``forward``, are disconnected).
``gradcli logdet`` reads ``Model.bijector`` (the two input names) and checks
each direction against its Jacobian and the two against each other
(``analyses.logdet``).
"""

from __future__ import annotations

import inspect
from types import ModuleType

import numpy as np

from gradcli.errors import ModelError
from gradcli.model.calling import OwnCall
from gradcli.model.core import Model, first_line, normalize_outputs, where_raised
from gradcli.model.paths import relative_path
from gradcli.model.structure import flat_structure
from gradcli.tf_import import import_tensorflow

#: What makes an object a bijector, and the model's outputs, in this order.
OUTPUTS = ("forward", "inverse", "forward_log_det_jacobian", "inverse_log_det_jacobian")
#: The event rank the log-dets are taken at: one value per example of R^n
#: (unless the bijector's least event rank is higher, ``event_ndims``).
EVENT_NDIMS = 1


def is_bijector(obj) -> bool:
    """Whether ``obj`` has the four methods of a bijector (module docstring)."""
    return all(callable(getattr(obj, method, None)) for method in OUTPUTS)


def second_input(name: str) -> str:
    """The name of y, the inverse's input, beside the file's input ``name``."""
    return "x" if name == "y" else "y"


def event_ndims(target, least: str) -> int:
    """The event rank a log-det is taken at: ``EVENT_NDIMS``, or the bijector's
    own least one (its ``forward_min_event_ndims`` or ``inverse_min_event_ndims``,
    named by ``least``) where that is higher. A bijector whose least rank is a
    structure (a multipart one) keeps ``EVENT_NDIMS``."""
    rank = getattr(target, least, None)
    return max(EVENT_NDIMS, int(rank)) if isinstance(rank, (int, np.integer)) else EVENT_NDIMS


def _takes_event_ndims(method) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return True
    return "event_ndims" in parameters or any(p.kind == p.VAR_KEYWORD for p in parameters.values())


def bijector_model(
    module: ModuleType, path: str, site: str, target, display: str, raw_inputs: dict, structure,
) -> Model:
    """The model of a file whose ``model`` is a bijector (module docstring)."""
    floating = [n for n, v in raw_inputs.items() if np.issubdtype(np.asarray(v).dtype, np.floating)]
    if structure.nested or len(raw_inputs) != 1 or len(floating) != 1:
        raise ModelError(
            f"{relative_path(path)}: a bijector model takes one floating input x ([n] or [batch, n]); "
            f"`inputs` gives {', '.join(raw_inputs) or 'nothing'}"
        )
    x_name = floating[0]
    y_name = second_input(x_name)
    ranks = {"forward_log_det_jacobian": event_ndims(target, "forward_min_event_ndims"),
             "inverse_log_det_jacobian": event_ndims(target, "inverse_min_event_ndims")}
    logdet_kwargs = {
        m: {"event_ndims": rank} if _takes_event_ndims(getattr(target, m)) else {} for m, rank in ranks.items()
    }

    def call(values: dict) -> dict:
        x, y = values[x_name], values[y_name]
        try:
            result = {
                "forward": target.forward(x),
                "inverse": target.inverse(y),
                "forward_log_det_jacobian": target.forward_log_det_jacobian(
                    x, **logdet_kwargs["forward_log_det_jacobian"]),
                "inverse_log_det_jacobian": target.inverse_log_det_jacobian(
                    y, **logdet_kwargs["inverse_log_det_jacobian"]),
            }
        except (Exception, KeyboardInterrupt):
            raise
        except BaseException as exc:  # as call_model: sys.exit() and the like are the model's error
            raise ModelError(
                f"{where_raised(exc, path)}: forward pass raised {type(exc).__name__}: {first_line(exc)}"
            ) from None
        return normalize_outputs(result, site)

    point = dict(raw_inputs)
    point[x_name], point[y_name] = _forward_at(target, np.asarray(point[x_name]), path)
    model = Model(
        name=display, path=path, function=call, point=point, wrt=[], native_dtypes={},
        structure=flat_structure([x_name, y_name]),
        own_call=OwnCall(call=call, variables={}, description=f"the bijector's {', '.join(OUTPUTS)}"),
    )
    model.bijector = (x_name, y_name)
    model.notes.append(
        f"{display} is a bijector: checked as a function of {x_name} and {y_name} = forward({x_name}) "
        f"with outputs {', '.join(OUTPUTS)} (log-dets with event_ndims="
        + (f"{ranks['forward_log_det_jacobian']}" if len(set(ranks.values())) == 1 else
           f"{ranks['forward_log_det_jacobian']} forward, {ranks['inverse_log_det_jacobian']} inverse") + ")"
    )
    return model


def _forward_at(target, x: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, forward(x)) at the file's point: y's value. A bijector whose forward
    takes no float64 (one TensorFlow Probability keeps in float32:
    ``ScaleMatvecLU``, ``FillScaleTriL``'s diagonal shift) is given x in
    float32, its own dtype: the check then tries float64 and says why it runs
    in float32 (``dtype_choice.settle_dtype``), as for any model that does not
    run in float64. Its forward raising in float32 too is the first error."""
    tf = import_tensorflow()
    attempts = [x] + ([x.astype(np.float32)] if x.dtype == np.float64 else [])
    failure = None
    for value in attempts:
        try:
            return value, np.asarray(target.forward(tf.constant(value)))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            failure = failure or exc
    raise ModelError(
        f"{where_raised(failure, path)}: the bijector's forward raised {type(failure).__name__}: {first_line(failure)}"
    ) from None
