"""The dtype a model is checked in: float64 whenever it runs in it, else its own.

``settle_dtype`` promotes the floating inputs to float64 and runs both passes
there (the forward pass twice, ``running.forward``; one reverse-mode product);
when one raises in float64 only, the model is checked in its own dtypes and a
note says why. Why a float64 gradient failed (the op, its line, TensorFlow's
words) is judged elsewhere (``verdicts.gradient_failure``, handed in as
``explain_failure`` by ``analyses.load``); without it, TensorFlow's first line.
"""

from __future__ import annotations

import numpy as np

from gradcli.errors import GradcliError, ModelError
from gradcli.model.core import CHECK_DTYPE, Model, first_cotangents, first_line, is_floating, name_list
from gradcli.model.running import check_finite_outputs, forward


def settle_dtype(model: Model, float64: bool, rng_seed: int = 0, explain_failure=None) -> None:
    """Promote floating inputs to float64 and run the forward pass once.

    Rule: check in float64 whenever the model runs in it, because float32
    round-off (about 1e-7 relative, amplified by 1/h in a difference quotient)
    would otherwise swamp the errors we look for. "Runs" means both passes: a
    model whose forward pass raises in float64 (e.g. it mixes in float32
    constants), or whose gradient raises in float64 where it does not in the
    model's own dtypes (a TensorFlow gradient kernel that accepts float32 only,
    such as ScaleAndTranslateGrad behind ``tf.image.resize`` with lanczos or
    antialiasing; ``_float64_gradient_failure``, one reverse-mode product each),
    runs in its own dtypes, with a note naming the op, and the tolerances
    follow that dtype (``compare.DEFAULT_TOLERANCES``).

    Inputs written as Python numbers (``inputs = {"x": [1.0, 2.0]}``,
    ``Model.python_numbers``) have no dtype of their own: numpy reads them as
    float64, TensorFlow as float32 (``tf.constant([1.0])``). They are checked
    in float64 like the rest; when the model does not run in float64 (a float32
    constant meets them), their own dtype is TensorFlow's, float32, and they
    are routed as float32 arrays are, with a note (``_as_python_floats``).
    """
    native = dict(model.point)
    changed = [n for n in model.wrt if native[n].dtype != CHECK_DTYPE]
    written = [n for n in model.wrt if n in model.python_numbers and native[n].dtype == CHECK_DTYPE]
    own = {n: d for n, d in model.own_dtypes.items() if n in native and native[n].dtype != d}
    if float64 and model.runs_in_float64:
        promoted = {n: (_promoted(v) if is_floating(v) else v) for n, v in native.items()}
        try:
            model.outputs, model.point = forward(model, promoted), promoted
            failure = _float64_gradient_failure(model, native, rng_seed, explain_failure) if changed else None
        except ModelError as exc:
            if not changed and not written and not own:
                raise
            reason = str(exc).split(': ', 1)[-1]
            if written:
                native, written = _as_python_floats(model, native, written, reason), []
                if not changed:  # only they change: float32 must run, else the float64 error stands
                    try:
                        model.outputs, model.point = forward(model, native), native
                    except ModelError:
                        raise exc from None
                    return check_finite_outputs(model)
            else:
                native = _as_own_dtypes(model, native, own)
                model.notes.append(
                    f"the model does not run in float64 ({reason}); checking in "
                    f"{native[(changed or list(own))[0]].dtype} with steps and tolerances for that dtype"
                )
        else:
            if failure is None:
                if changed:
                    model.notes.append(
                        f"promoted {name_list(changed)} from "
                        f"{native[changed[0]].dtype} to float64 for checking"
                    )
                kept = getattr(model.function, "float32_casts", None)
                if kept:
                    model.notes.append(
                        f"kept float64 where the model casts to float32 ({name_list(sorted(kept))}): "
                        "a cast up to at least float32 around an unstable op (Keras' mixed-precision idiom, "
                        "`ops.cast(x, \"float32\")`) would round the check's float64 values; the cast's "
                        "derivative is the identity either way"
                    )
                return check_finite_outputs(model)
            model.notes.append(
                f"the gradient does not run in float64 ({failure}); checking in "
                f"{native[changed[0]].dtype} with steps and tolerances for that dtype"
            )
    try:
        model.outputs, model.point = forward(model, native), native
    except ModelError as exc:  # float64 Python numbers beside float32 constants: TensorFlow's float32
        if not written:
            raise
        native = _as_python_floats(model, native, written, str(exc).split(': ', 1)[-1])
        try:
            model.outputs, model.point = forward(model, native), native
        except ModelError:
            raise exc from None
    check_finite_outputs(model)


def _as_own_dtypes(model: Model, values: dict, own: dict) -> dict:
    """``values`` with the inputs the model converts itself (``Model.own_dtypes``:
    float64 data of a float32 Keras model) in the dtype it converts them to,
    which becomes their own dtype, with a note (``settle_dtype``)."""
    if not own:
        return values
    model.native_dtypes.update(own)
    names = list(own)
    model.notes.append(
        f"{name_list(names)} {'is' if len(names) == 1 else 'are'} given as {values[names[0]].dtype}; "
        f"the model converts {'it' if len(names) == 1 else 'them'} to {own[names[0]]} when called, "
        "its own dtype"
    )
    return {**values, **{n: values[n].astype(d) for n, d in own.items()}}


def _as_python_floats(model: Model, values: dict, written: list[str], reason: str) -> dict:
    """``values`` with the inputs ``written`` as Python numbers in float32, the
    dtype TensorFlow gives Python floats, which becomes their own dtype
    (``Model.native_dtypes``), with a note saying why (``settle_dtype``)."""
    model.native_dtypes.update({n: np.dtype(np.float32) for n in written})
    model.notes.append(
        f"the model does not run in float64 ({reason}); {name_list(written)} "
        f"{'is' if len(written) == 1 else 'are'} written as Python numbers: checking in float32, "
        "TensorFlow's dtype for them, with steps and tolerances for that dtype"
    )
    return {**values, **{n: values[n].astype(np.float32) for n in written}}


def _reverse_product(model: Model, values: dict, cotangents: dict) -> tuple[BaseException | None, dict | None]:
    """One reverse-mode product at ``values`` (an eager tape, every floating
    output seeded with its cotangent), as a training step takes it: (the
    exception a gradient raised, None) or (None, the product)."""
    from gradcli.numerics import autodiff

    if not cotangents or not model.wrt:
        return None, None  # nothing to differentiate: no gradient to raise
    try:
        return None, autodiff.vjp(model.function, values, list(model.wrt), cotangents)
    except (GradcliError, KeyboardInterrupt):
        raise
    except Exception as exc:  # whatever the gradient raised: compared below
        return exc, None


def _promoted(value) -> np.ndarray:
    """``value`` in float64, converted where its tensor keeps it
    (``held.formed_array``): the forward pass holds the point as tensors, and
    a promoted array held already is not copied into one again (a GPT-2
    small's 124M weights: 1 GB)."""
    from gradcli.numerics.held import formed_array

    value = np.asarray(value)
    return formed_array(value.shape, CHECK_DTYPE, lambda out: np.copyto(out, value.reshape(-1)))


def _float64_gradient_failure(model: Model, native: dict, rng_seed: int = 0, explain_failure=None) -> str | None:
    """Why the reverse pass fails in float64 but not in the model's own dtypes
    (``settle_dtype``): "Op 'name' at file:line: its gradient raised ...", or
    None when it runs in float64 or fails in both (then it is the model's
    error, reported by the check). Costs one reverse-mode product at the
    promoted point, and one more at the native point only when that fails.
    The product is taken with the proof's cotangents (``first_cotangents``)
    and kept (``Model.taken_vjp``): the proof, the gradient-path rule and the
    first probe reuse it (on a ResNet-50 each such pass is about 0.8 s)."""
    cotangents = first_cotangents(model.outputs, rng_seed)
    failure, product = _reverse_product(model, model.point, cotangents)
    if failure is None:
        if product is not None:
            model.taken_vjp = (model.point, cotangents, product)
        return None
    if _reverse_product(model, native, cotangents)[0] is not None:
        return None
    if explain_failure is None:
        return f"the gradient raised {type(failure).__name__}: {first_line(failure)}"
    return explain_failure(model, failure)
