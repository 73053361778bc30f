"""Does TensorFlow see any gradient at all? One rule for every command.

A model computed outside TensorFlow (numpy, ``.numpy()`` arithmetic, Python
floats) or cut off by ``tf.stop_gradient`` / integer casts gives TensorFlow no
path from the inputs to the outputs: ``GradientTape.gradient`` returns None.
Reported as zeros, such a model would "pass" a convexity expectation or show
a zero Jacobian; so when *no* output is reached from *any* differentiated
input, the analysis stops with a model error (exit 3) instead. A model that
reaches some outputs from some inputs goes on: the disconnected pairs are
shown as such (``check``'s ``disconnected`` verdict, ``None`` blocks).
"""

from __future__ import annotations

import numpy as np

from gradcli.errors import GradcliError, ModelError
from gradcli.model.loading import Model


def require_gradient(
    model: Model, outputs: list[str], wrt: list[str] | None = None, *, numeric_option: bool = False,
    through=None, seed: int | None = None,
) -> tuple | None:
    """Raise ``ModelError`` if TensorFlow returns no gradient of ``outputs``
    for any input in ``wrt`` (default ``model.wrt``). One reverse pass:
    whether a gradient is None depends on the graph, not on the seed, so a
    product already taken at the point (``Model.taken_vjp``, every floating
    output seeded with a random draw) that holds a gradient answers it.
    Otherwise the pass is seeded with ones, or, given the check's ``seed``,
    with the proof's draw (``first_cotangents``) where that seeds exactly
    ``outputs`` for every input: the product is then kept as ``taken_vjp``,
    and the proof and the cotangent rule do not take it again (one forward
    and one backward pass fewer per check: 0.35 of 8.9 profiled seconds of a
    TensorFlow Probability ``bessel_ive``, whose passes run its loops op by op).
    ``numeric_option``: the command has the ``numeric`` option, so say so.
    ``through``: cotangents -> that VJP for ``model.wrt``, where the caller
    takes its products other than by ``autodiff.vjp`` (a warm check's program).
    Returns (cotangents, VJP) of a pass seeded with the proof's draw, which
    the proof then compares with the user's own call instead of taking it
    again (``same_function.prove``'s ``taken``; a warm check's program: one
    of the three VJPs of its call), else None."""
    from gradcli.model.core import first_cotangents
    from gradcli.numerics import autodiff
    from gradcli.verdicts.same_function import taken_product

    wrt = list(model.wrt if wrt is None else wrt)
    if not outputs or not wrt:
        return None
    taken = taken_product(model)
    if taken is not None and set(outputs) <= set(taken[0]) and any(taken[1].get(n) is not None for n in wrt):
        return None
    seeds = {o: np.ones(np.shape(model.outputs[o]), model.outputs[o].dtype) for o in outputs}
    kept = None  # the proof's draw, where it seeds this pass
    if seed is not None and wrt == list(model.wrt):
        drawn = first_cotangents(model.outputs, seed)
        if drawn.keys() == set(outputs):
            seeds = kept = drawn
    try:
        if through is not None and wrt == list(model.wrt):
            grads = through(seeds)
        else:
            grads = autodiff.vjp(model.function, model.point, wrt, seeds)
    except GradcliError:
        raise
    except Exception:  # noqa: BLE001 - the analysis itself reports why TensorFlow fails
        return None
    if kept is not None:
        model.taken_vjp = (model.point, kept, grads)
    if any(g is not None for g in grads.values()):
        return None if kept is None else (kept, grads)
    hint = "; use {@numeric} for finite differences only" if numeric_option else ""
    raise ModelError(
        f"{model.name}: TensorFlow sees no gradient: no output ({', '.join(outputs)}) depends on "
        f"{', '.join(wrt)} through TensorFlow operations (computed in numpy or another "
        f"library, or cut by tf.stop_gradient or an integer cast?){hint}"
    )
