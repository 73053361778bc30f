"""Prove that the function gradcli differentiates is the user's own.

gradcli never differentiates the user's object directly: it calls a wrapper
(``Model.function``) that passes named arrays, promotes to float64, swaps
weights for inputs, clones Keras models in float64, freezes SavedModels. Any
of these could change *which gradient code runs*: a ``tf.custom_gradient``
called with keywords is differentiated through its forward ops, a clone can
lose a custom layer's state, a frozen graph can drop a gradient override. A
check of such a wrapper would then pass or fail a function the user never
trains.

Rule (``prove``): before any verdict, one reverse-mode product is taken twice
with the same random cotangent c (standard normal, from the check's seed):

* through ``Model.function``, with respect to the differentiated inputs, as the
  check does;
* through the user's own call (``Model.own_call``: the object called as
  training code calls it, positionally, with a tape watching its variables).

For every differentiated input n the two products g_n and h_n must satisfy

    |g_n - h_n| <= PROOF_RTOL(dtype) * (|g_n| + |h_n| + sqrt(size_n / size) (|G| + |H|))

(2-norms; G and H are the whole products over every input). The second term
is the input's share of the whole gradient: round-off is relative to the
terms a backward pass sums, not to its result, so a gradient that is zero by
cancellation (an attention key's bias: softmax ignores it) comes out as
noise of that size in float32 and must not count as a difference.
``dtype`` is the coarsest floating dtype either side computes in
(a Keras model is called in its own float32 while the check runs a float64
clone). PROOF_RTOL is sqrt(eps): both sides evaluate the same function, so
they differ by the round-off of one backward pass (a few hundred eps for
well-conditioned models, well below sqrt(eps)), while any difference of code
path, such as a custom gradient run on one side only, moves the product by the
size of that gradient's error (a bug worth reporting is at least 1e-5 relative
in float64). A reference that returns None (no gradient) where the wrapper
returns one, or the other way round, differs too. When the user's call cannot
run at the check's point (float64 data into float32 weights), both sides run
at the model's own dtypes instead.

A failed proof fails the model whatever the pairs say (``ModelResult.failed``):
a verdict about another function is no verdict. A model with no own call to
compare (none is known for it) is reported as not proven, in a note.
"""

from __future__ import annotations

import numpy as np

from gradcli.errors import error_line
from gradcli.model.core import first_cotangents
from gradcli.results import CallProof
from gradcli.tf_import import import_tensorflow

#: Smallest norm treated as nonzero when both products are tiny: below it the
#: two are equal (both are zero up to underflow).
TINY = 1e-300


def proof_rtol(dtype) -> float:
    """sqrt(eps) of ``dtype``: see the module docstring for the reason."""
    from gradcli.numerics.finite_diff import machine_eps

    return float(np.sqrt(machine_eps(dtype)))


def prove(model, seed: int = 0, taken=None, through=None) -> CallProof | None:
    """Compare one VJP through ``model.function`` with the same VJP through
    ``model.own_call`` (see the module docstring). None when the model has no
    own call to compare with. ``taken``: (cotangents, VJP through
    ``model.function`` at the point) when the caller has one already (the layer
    pass's probes): the user's call is then compared at those cotangents.
    ``through``: cotangents -> that VJP at the point, where the check takes
    its products other than by ``autodiff.vjp`` (a warm check's kept program)."""
    own = model.own_call
    if own is None or not model.wrt:
        return None
    tf = import_tensorflow()
    from gradcli.numerics import autodiff

    outputs = {n: v for n, v in model.outputs.items() if np.issubdtype(np.asarray(v).dtype, np.floating)}
    if not outputs:
        return None
    cotangents = first_cotangents(outputs, seed)
    recorded = taken_product(model)  # loading's float64 gradient test took it already
    if taken is None and through is None and recorded is not None and same_cotangents(recorded[0], cotangents):
        taken = recorded
    if taken is not None:
        cotangents = taken[0]
    errors = []
    for point in _points(model):
        try:
            theirs, dtypes = _own_vjp(model, own, point, cotangents)
        except Exception as exc:  # noqa: BLE001 - the user's call at this dtype: try the next point
            errors.append(exc)
            continue
        if taken is not None and point is model.point:
            ours = taken[1]
        elif through is not None and point is model.point:
            ours = through(cotangents)
        else:
            ours = autodiff.vjp(model.function, point, model.wrt, cotangents)
        if point is model.point:
            model.taken_vjp = (model.point, cotangents, ours)
        dtypes.add(np.dtype(model.dtype) if point is model.point else _coarsest(
            [np.asarray(point[n]).dtype for n in model.wrt]))
        proof = _compare(model.wrt, ours, theirs, _coarsest(dtypes), own.description)
        if proof.differs:
            proof = _reentrant(model, point, cotangents, ours, proof) or proof
        return proof
    exc = errors[-1]
    first = error_line(exc)
    return CallProof(
        proven=False, differs=False, call=own.description, input="", rel_difference=float("nan"),
        rtol=float("nan"), dtype="",
        detail=f"could not run the user's own call to compare ({type(exc).__name__}: {first})",
    )


def _reentrant(model, point, cotangents, ours, proof) -> CallProof | None:
    """The reentrancy rule: before a difference is blamed on the call, the
    product through gradcli's own call is taken again with the same
    cotangent. When the two passes differ by the proof's own rule, the
    gradient is nondeterministic (a random op or state in a gradient
    function): that is the finding, with the op whose own gradient differs run
    to run (``ModelGraph.nondeterministic_gradient``); else None."""
    from gradcli.numerics import autodiff
    from gradcli.verdicts.culprit import ModelGraph

    again = autodiff.vjp(model.function, point, model.wrt, cotangents)
    repeat = _compare(model.wrt, ours, again, proof.dtype, "gradcli's call again")
    if not repeat.differs:
        return None
    try:
        site = ModelGraph(model).nondeterministic_gradient()
    except Exception:  # noqa: BLE001 - naming the op is a bonus
        site = None
    where = f" ({site.description} at {site.location or site.op_name})" if site is not None else ""
    return CallProof(
        proven=False, differs=True, call=proof.call, input=repeat.input, rel_difference=repeat.rel_difference,
        rtol=repeat.rtol, dtype=repeat.dtype, nondeterministic=True, site=site,
        detail=(
            f"nondeterministic gradient{where}: two reverse passes through the same call with the same "
            f"cotangent differ ({repeat.detail.replace('the user' + chr(39) + 's call', 'the second pass')})"
        ),
    )


def taken_product(model):
    """(cotangents, VJP through ``model.function``) that ``prove`` took at the
    model's current point (``Model.taken_vjp``), or None: the checks' first
    probe draws the same cotangents."""
    taken = model.taken_vjp
    if taken is None or taken[0] is not model.point:
        return None
    return taken[1], taken[2]


def same_cotangents(a: dict, b: dict) -> bool:
    """Whether two cotangent dicts are the same draw (a taken product applies)."""
    return a.keys() == b.keys() and all(np.array_equal(a[o], b[o]) for o in a)


def _points(model):
    """The check's point, then (if it differs) the point in the model's own dtypes."""
    yield model.point
    native = {
        n: np.asarray(v).astype(model.native_dtypes[n])
        if n in model.native_dtypes and np.issubdtype(np.asarray(v).dtype, np.floating) else v
        for n, v in model.point.items()
    }
    if any(native[n].dtype != np.asarray(model.point[n]).dtype for n in native):
        yield native


def _own_vjp(model, own, point: dict, cotangents: dict):
    """The VJP through the user's own call at ``point``: data inputs as watched
    tensors, weights as the user's variables holding the point's values for the
    duration (restored after). Returns (input -> array or None, dtypes seen)."""
    from gradcli.numerics import autodiff

    tf = import_tensorflow()
    from gradcli.numerics.held import tensors_of
    data = autodiff.fresh(tensors_of({n: v for n, v in point.items() if n not in own.variables}))
    saved = {}
    try:
        for n, variable in own.variables.items():
            value = np.asarray(point[n])
            current = np.asarray(variable.numpy())
            if current.shape != value.shape or not np.array_equal(current, value.astype(current.dtype)):
                saved[n] = current
                variable.assign(value.astype(current.dtype))
        sources = [own.variables[n] if n in own.variables else data[n] for n in model.wrt]
        with tf.GradientTape() as tape:
            for n in model.wrt:
                if n not in own.variables:
                    tape.watch(data[n])
            outputs = own.call(data)
        names = [o for o in cotangents if o in outputs]
        grads = autodiff.reverse(
            tape, [outputs[o] for o in names], sources,
            output_gradients=[tf.cast(cotangents[o], outputs[o].dtype) for o in names],
        )
    finally:
        for n, value in saved.items():
            own.variables[n].assign(value)
    dtypes = {_numpy_dtype(outputs[o].dtype) for o in names}
    dtypes |= {_numpy_dtype(v.dtype) for n, v in own.variables.items() if n in model.wrt}
    return {n: autodiff.to_numpy(g) for n, g in zip(model.wrt, grads)}, dtypes


def _numpy_dtype(dtype):
    """A TensorFlow DType or a Keras dtype name as numpy's (bfloat16 by name:
    numpy does not count ml_dtypes' bfloat16 as floating)."""
    name = getattr(dtype, "name", None) or str(dtype)
    return "bfloat16" if name == "bfloat16" else np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def _coarsest(dtypes):
    """The floating dtype with the largest eps (bfloat16 included), float64 if none."""
    from gradcli.numerics.finite_diff import machine_eps

    floats = [d for d in dtypes if d == "bfloat16" or np.issubdtype(np.dtype(d), np.floating)]
    return max(floats, key=machine_eps) if floats else np.dtype(np.float64)


def _finite_norms(a, b):
    """(|a|, |b|) when every element of both is finite, else None. Finite
    norms say so at once (a NaN or an infinity carries into the sum of
    squares), sparing a pass over each array (GPT-2 small's 124M weights);
    a norm that is not finite may have overflowed, so the elements say."""
    with np.errstate(invalid="ignore"):  # inf - inf inside the sum: not finite, as said
        norm_a, norm_b = np.linalg.norm(a), np.linalg.norm(b)
    if (np.isfinite(norm_a) and np.isfinite(norm_b)) or (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return norm_a, norm_b
    return None


def _compare(wrt, ours: dict, theirs: dict, dtype, description: str) -> CallProof:
    rtol = proof_rtol(dtype)
    worst, worst_rel, detail = "", 0.0, ""
    # Each gradient converted, tested and measured once: a BERT-base layer's 17
    # gradients (7M elements) were converted to float64 twice and their norms
    # taken three times, 58 ms a proof against 35 ms.
    both = {n: (np.asarray(ours[n], np.float64), np.asarray(theirs[n], np.float64)) for n in wrt
            if ours.get(n) is not None and theirs.get(n) is not None}
    norms = {n: _finite_norms(a, b) for n, (a, b) in both.items() if a.shape == b.shape}
    norms = {n: pair for n, pair in norms.items() if pair is not None}  # the comparable ones: same shape, finite
    total_size = max(1, sum(both[n][0].size for n in norms))
    whole = sum(na**2 for na, _ in norms.values()) ** 0.5 + sum(nb**2 for _, nb in norms.values()) ** 0.5
    for n in wrt:
        if (ours.get(n) is None) != (theirs.get(n) is None):
            which = "gradcli's call" if ours.get(n) is None else "the user's call"
            return CallProof(
                proven=False, differs=True, call=description, input=n, rel_difference=float("inf"),
                rtol=rtol, dtype=str(dtype),
                detail=f"{which} gives no gradient for {n}, the other one does",
            )
        if n not in both:
            continue
        a, b = both[n]
        if a.shape != b.shape:
            return CallProof(
                proven=False, differs=True, call=description, input=n, rel_difference=float("inf"),
                rtol=rtol, dtype=str(dtype),
                detail=f"the gradients for {n} have shapes {list(a.shape)} and {list(b.shape)}",
            )
        if n not in norms:
            continue  # a NaN product is the check's to report, element by element
        norm_a, norm_b = norms[n]
        size = norm_a + norm_b + np.sqrt(a.size / total_size) * whole
        difference = np.linalg.norm(a - b)
        rel = 0.0 if difference <= TINY else difference / max(size, TINY)
        if rel > worst_rel or not worst:
            worst, worst_rel = n, rel
        if rel > rtol:
            detail = (
                f"for {n}, |g - g_own| / (|g| + |g_own| + its share of the whole) = {rel:.3g} > {rtol:.2g} "
                f"(sqrt(eps) of {dtype}): gradcli's call gives |g| = {norm_a:.6g}, "
                f"the user's call {norm_b:.6g}"
            )
            return CallProof(
                proven=False, differs=True, call=description, input=n, rel_difference=rel,
                rtol=rtol, dtype=str(dtype), detail=detail,
            )
    return CallProof(
        proven=True, differs=False, call=description, input=worst, rel_difference=worst_rel,
        rtol=rtol, dtype=str(dtype), detail="",
    )
