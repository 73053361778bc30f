"""Hessians and convexity: eigenvalues of the Hessian at a point and over a region.

The function is a model's scalar f(theta) (``gradcli.analyses.objective``): theta is the
differentiated inputs flattened together.

* Small problems (n <= ``DENSE_LIMIT``): the dense Hessian, column by column as
  forward-over-reverse Hessian-vector products H e_j; its symmetry error; all
  eigenvalues of its symmetric part; a finite-difference check of it (the
  gradient differenced by ``FiniteDifferences``, see ``gradcli.analyses.second_order``).
* Large problems: the Hessian is never built. The ``top`` smallest and largest
  eigenvalues come from thick-restart Lanczos on Hessian-vector products with a
  basis of at most ``basis`` vectors (memory O(basis * n), basis ~ 4 top + 20);
  the trace from Hutchinson's estimator with its standard error.
* ``samples`` points drawn around the point: the sign of the extreme eigenvalues
  at each, and the worst point as a witness.

Verdict rule (``verdicts.curvature.classify``): an eigenvalue within
``zero_tol`` of 0 counts as zero. ``zero_tol`` = n * eps * max|lambda| (the round-off a backward-stable
symmetric eigensolver and the n-term sums of an HVP make, numpy's matrix_rank
rule) plus the computed Hessian's own error: for the dense Hessian its measured
asymmetry ||H - H^T||_F / 2 (exact Hessians are symmetric, so the asymmetric
part is error made visible); for Lanczos the largest residual norm of the
extreme Ritz values (an eigenvalue lies within its residual of each Ritz value).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gradcli import progress
from gradcli.verdicts import compare
from gradcli.verdicts.curvature import classify, meets
from gradcli.errors import ModelError
from gradcli.options import LANCZOS_TOL, HessianOptions  # noqa: F401 - part of this API

#: auto uses the dense Hessian up to this many parameters: n HVPs and an
#: O(n^3) eigendecomposition stay within seconds; beyond it Lanczos.
DENSE_LIMIT = 2000
#: Hessian-vector products for Lanczos and Hutchinson: reverse-over-reverse, the
#: faster route in TensorFlow as measured by bench/hessian_speed.py (its
#: ForwardAccumulator-over-tape graph costs about 3x more on a 200k model).
#: Dense Hessians use forward-over-reverse; a second-order check (``order=2``) compares both.
ITERATIVE_HVP = "reverse"
from gradcli.analyses.load import load
from gradcli.model.loading import Model
from gradcli.analyses.reach import require_gradient
from gradcli.analyses.objective import Objective, choose_cotangents
from gradcli.results.hessian import (
    NEGATIVE_DEFINITE, NEGATIVE_SEMIDEFINITE, POSITIVE_DEFINITE, POSITIVE_SEMIDEFINITE, FDCheck, HessianResult, SamplePoint, Sampling,
    Slice, Spectrum, Trace,
)

def condition_number(eigenvalues: np.ndarray, zero_tol: float) -> float:
    magnitudes = np.abs(eigenvalues)
    if magnitudes.min(initial=np.inf) <= zero_tol:
        return float("inf")
    return float(magnitudes.max() / magnitudes.min())


# -- dense ------------------------------------------------------------------------


def dense_spectrum(H: np.ndarray, zero_tol: float | None = None):
    """All eigenvalues of the symmetric part of ``H`` -> (Spectrum, eigenvectors, asymmetry)."""
    n = len(H)
    asymmetry = np.abs(H - H.T)
    sym = (H + H.T) / 2
    eigenvalues, vectors = np.linalg.eigh(sym)
    eps = np.finfo(H.dtype).eps
    scale = float(np.abs(eigenvalues).max(initial=0.0))
    if zero_tol is None:
        roundoff = n * eps * scale
        skew = float(np.linalg.norm(H - H.T) / 2)
        zero_tol = roundoff + skew
        rule = (
            f"n*eps*max|lambda| = {roundoff:.3g} (eigensolver round-off) + "
            f"||H - H^T||_F/2 = {skew:.3g} (asymmetry of the computed Hessian)"
        )
    else:
        rule = "{@zero_tol}"
    spectrum = Spectrum(
        method="dense",
        eigenvalues=eigenvalues,
        smallest=float(eigenvalues[0]),
        largest=float(eigenvalues[-1]),
        zero_tol=float(zero_tol),
        zero_rule=rule,
        verdict=classify(eigenvalues[0], eigenvalues[-1], zero_tol),
        condition=condition_number(eigenvalues, zero_tol),
        hvps=n,
    )
    return spectrum, vectors, float(asymmetry.max(initial=0.0))


# -- Lanczos -----------------------------------------------------------------------


@dataclass
class Lanczos:
    """Output of ``lanczos_extremes``: Ritz values ascending, their residual norms."""

    values: np.ndarray
    residuals: np.ndarray
    lowest_vector: np.ndarray
    matvecs: int
    restarts: int
    converged: bool
    scale: float  # max |Ritz value|: the norm estimate tolerances are relative to


def lanczos_extremes(
    matvec, n: int, k: int, dtype=np.float64, rng=None, tol: float = LANCZOS_TOL,
    basis: int | None = None, max_matvecs: int | None = None,
) -> Lanczos:
    """The ``k`` smallest and ``k`` largest eigenvalues of the symmetric operator ``matvec``.

    Thick-restart Lanczos (Wu and Simon, 2000): build an orthonormal Krylov basis
    of up to ``basis`` vectors, take Ritz values of the projected matrix, keep
    the Ritz vectors at both ends of the spectrum (a bit more than ``k`` each)
    plus the last residual direction, and extend again. Memory: ``basis + 1``
    vectors of length n. Each new vector is orthogonalised against the whole
    basis by classical Gram-Schmidt, repeated once when the first pass removed
    more than 1/sqrt(2) of its norm ("twice is enough", Daniel et al. 1976), so
    no spurious copies of converged eigenvalues appear. Converged when each
    wanted Ritz value has residual ||H y - theta y|| <= tol * max|theta|.
    """
    rng = rng or np.random.default_rng(0)
    basis = min(n, basis or max(4 * k + 20, 30))
    want = min(k, basis)
    keep_each = min(want + max(2, (basis - 2 * want) // 4), basis // 2)
    max_matvecs = max_matvecs or max(50 * basis, 2000)
    V = np.empty((basis + 1, n), dtype)
    T = np.zeros((basis, basis))
    eps = np.finfo(dtype).eps
    V[0] = _normalise(rng.standard_normal(n).astype(dtype))
    start, matvecs, restarts = 0, 0, 0
    beta, scale = 0.0, 0.0
    while True:
        for j in range(start, basis):
            w = np.array(matvec(V[j]), dtype)
            matvecs += 1
            progress.report("Lanczos", matvecs, None, f"{matvecs} Hessian-vector product{'s' * (matvecs != 1)}, "
                            f"{restarts} restart{'s' * (restarts != 1)}")
            h = _orthogonalise(V[: j + 1], w)
            T[: j + 1, j] = h
            T[j, : j + 1] = h
            scale = max(scale, float(np.abs(h).max()))
            beta = float(np.linalg.norm(w))
            if j + 1 == n:  # the basis spans everything: the projection is exact
                beta = 0.0
                break
            if beta <= n * eps * max(scale, np.finfo(dtype).tiny):
                # Invariant subspace: continue with a fresh direction (coupling 0),
                # so eigenvalues of multiplicity > 1 still show up.
                w = rng.standard_normal(n).astype(dtype)
                _orthogonalise(V[: j + 1], w)
                _orthogonalise(V[: j + 1], w)
                V[j + 1] = _normalise(w)
                beta = 0.0
            else:
                V[j + 1] = w / beta
            if j + 1 < basis:
                T[j + 1, j] = T[j, j + 1] = beta
        m = j + 1
        theta, Y = np.linalg.eigh(T[:m, :m])
        residuals = np.abs(beta * Y[m - 1])
        scale = max(scale, float(np.abs(theta).max()))
        wanted = _ends(m, want)
        done = bool(np.all(residuals[wanted] <= tol * scale)) or m == n
        if done or matvecs >= max_matvecs:
            progress.report("Lanczos", matvecs, matvecs)  # the stage ends
            lowest = Y[:, 0] @ V[:m]
            return Lanczos(
                values=theta[wanted], residuals=residuals[wanted], lowest_vector=lowest,
                matvecs=matvecs, restarts=restarts, converged=done, scale=scale,
            )
        kept = _ends(m, keep_each)
        p = len(kept)
        V[:p] = Y[:, kept].T @ V[:m]
        V[p] = V[m]
        T[:] = 0.0
        T[np.arange(p), np.arange(p)] = theta[kept]
        T[p, :p] = T[:p, p] = beta * Y[m - 1, kept]
        start = p
        restarts += 1


def _ends(m: int, k: int) -> np.ndarray:
    """Indices of the k smallest and k largest of m ascending values (no repeats)."""
    return np.unique(np.concatenate([np.arange(min(k, m)), np.arange(max(m - k, 0), m)]))


def _orthogonalise(basis: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w -= basis^T (basis w) in place, twice if needed; returns the coefficients."""
    before = np.linalg.norm(w)
    h = basis @ w
    w -= h @ basis
    if np.linalg.norm(w) < before / np.sqrt(2.0):
        h2 = basis @ w
        w -= h2 @ basis
        h = h + h2
    return h


def _normalise(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def lanczos_spectrum(objective: Objective, theta, top: int, tol: float, rng, zero_tol=None):
    """Extreme eigenvalues by Lanczos -> (Spectrum, lowest eigenvector)."""
    result = lanczos_extremes(
        lambda v: objective.hvp(theta, v, ITERATIVE_HVP), objective.n, top, objective.dtype, rng, tol
    )
    values = result.values
    eps = np.finfo(objective.dtype).eps
    if zero_tol is None:
        roundoff = objective.n * eps * result.scale
        residual = float(result.residuals.max(initial=0.0))
        zero_tol = roundoff + residual
        rule = (
            f"n*eps*max|lambda| = {roundoff:.3g} (round-off) + largest residual "
            f"{residual:.3g} (an eigenvalue lies within it of each Ritz value)"
        )
    else:
        rule = "{@zero_tol}"
    verdict = classify(values[0], values[-1], zero_tol)
    # Only a definite Hessian has its smallest |lambda| at an end of the spectrum.
    condition = (
        condition_number(values[[0, -1]], zero_tol)
        if verdict in (POSITIVE_DEFINITE, NEGATIVE_DEFINITE) else
        (float("inf") if verdict in (POSITIVE_SEMIDEFINITE, NEGATIVE_SEMIDEFINITE) else None)
    )
    spectrum = Spectrum(
        method="lanczos", eigenvalues=values, smallest=float(values[0]),
        largest=float(values[-1]), zero_tol=float(zero_tol), zero_rule=rule, verdict=verdict,
        condition=condition, residuals=result.residuals, hvps=result.matvecs,
        iterations=result.restarts, converged=result.converged,
    )
    return spectrum, result.lowest_vector


def hutchinson_trace(objective: Objective, theta, probes: int, rng) -> Trace:
    """tr(H) ~ mean of z^T H z over Rademacher z (unbiased; variance 2 sum_{i!=j} H_ij^2
    per probe); the standard error is the sample standard deviation / sqrt(probes)."""
    z = rng.choice(np.array([-1.0, 1.0], objective.dtype), size=(probes, objective.n))
    samples = np.einsum("kn,kn->k", z, objective.hvps(theta, z, ITERATIVE_HVP))
    return Trace(
        estimate=float(samples.mean()),
        stderr=float(samples.std(ddof=1) / np.sqrt(probes)),
        probes=probes,
        method="hutchinson",
    )


# -- the whole analysis ----------------------------------------------------------------


def analyse_path(spec: str, options: HessianOptions) -> HessianResult:
    model = load(spec, options)
    return analyse(model, options)


def analyse(model: Model, options: HessianOptions) -> HessianResult:
    from gradcli.model.structure import split_complex_outputs

    split_complex_outputs(model)  # complex outputs as their real and imaginary parts
    started = time.perf_counter()
    rng = np.random.default_rng(options.rng_seed)
    cotangents, description = choose_cotangents(model, options.cotangents)
    require_gradient(model, list(cotangents))
    objective = Objective(model, cotangents)
    n = objective.n
    if n == 0:
        raise ModelError(f"{model.name}: nothing to differentiate")
    method = options.method
    if method == "auto":
        method = "dense" if n <= DENSE_LIMIT else "lanczos"
    theta = objective.theta0
    value = objective.value(theta)
    gradient = objective.gradient(theta)
    result_kw, restricted = {}, ""  # restricted: the dense Hessian on a Cholesky's domain, as a note
    if method == "dense":
        from gradcli.memory import SECOND_ORDER_BLOCKS, dense_bytes, require_memory

        # With its finite-difference check (in full for a dense Hessian) it holds
        # SECOND_ORDER_BLOCKS n x n blocks at the peak, without it one.
        blocks = SECOND_ORDER_BLOCKS if options.fd_check else 1
        what = f"the dense Hessian ({n} x {n} {np.dtype(objective.dtype)})"
        if options.fd_check:
            what = (f"the dense Hessian and its finite-difference check "
                    f"({blocks} x {n} x {n} {np.dtype(objective.dtype)})")
        require_memory(
            dense_bytes(blocks * n * n, np.dtype(objective.dtype).itemsize),
            what,
            "Lanczos ({@method} lanczos) needs only Hessian-vector products", options.max_memory,
        )
        H = objective.dense_hessian(theta)
        _require_finite(H, model, "the Hessian")
        spectrum, vectors, asymmetry = dense_spectrum(H, options.zero_tol)
        lowest = vectors[:, 0]
        trace = Trace(float(np.trace(H)), 0.0, 0, "exact")
        result_kw = dict(hessian=H, symmetry_error=asymmetry, eigenvectors=vectors)
        restricted = on_symmetric_directions(model, objective, H, options.zero_tol)
    else:
        spectrum, lowest = lanczos_spectrum(
            objective, theta, options.top, options.tol, rng, options.zero_tol
        )
        trace = hutchinson_trace(objective, theta, options.trace_probes, rng)
    result = HessianResult(
        name=model.name, path=model.path, dtype=str(model.dtype), function=description, n=n,
        blocks=objective.blocks, labels=objective.labels() if n <= DENSE_LIMIT else [],
        value=value, gradient_norm=float(np.linalg.norm(gradient)), spectrum=spectrum,
        trace=trace, lowest_vector=lowest, expect=options.expect,
        point={b.name: model.point[b.name] for b in objective.blocks},
        notes=list(model.notes), **result_kw,
    )
    if restricted:
        result.notes.append(restricted)
    if not spectrum.converged:
        result.notes.append(
            f"Lanczos stopped after {spectrum.hvps} Hessian-vector products before every "
            f"residual reached {options.tol:g} * max|lambda|; the residuals give the accuracy"
        )
    if options.fd_check:
        from gradcli.analyses.second_order import check_objective

        fd_started = time.perf_counter()
        tol = compare.tolerance(str(model.dtype), options.rtol, options.atol)
        mode = "full" if method == "dense" else "fast"
        pairs, evaluations = check_objective(
            objective, tol, mode, probes=3, rng=rng,
            hessian=result.hessian, function_name="f",
        )
        result.fd_check = FDCheck(
            mode=mode, tolerance=tol, pairs=pairs, evaluations=evaluations,
            seconds=time.perf_counter() - fd_started,
        )
    if options.samples:
        result.sampling = sample_region(objective, spectrum, options, method)
    if options.expect:
        _judge(result, options.expect)
    if options.slice:
        result.slice = slice_along(objective, theta, lowest, spectrum.smallest,
                                   options.radius or 1.0, gradient)
    if objective.eager:
        result.notes.append(
            "the model could not be traced by tf.function: derivatives ran eagerly"
        )
    result.seconds = time.perf_counter() - started
    return result


def on_symmetric_directions(model, objective, H, zero_tol) -> str:
    """A note on the Hessian restricted to the directions that move a matrix
    ``tf.linalg.cholesky`` reads symmetrically (``verdicts.symmetric``), or
    "" where no input reaches one. Such an op computes from one triangle of
    its matrix, so f does not change along the other's entries: over every
    direction the Hessian has those zero eigenvalues (semidefinite at best),
    while on the op's domain, the symmetric matrices, it may be definite
    (logdet of a covariance is concave there). Same spectrum rule
    (``dense_spectrum``) on ``N^T H N``, N an orthonormal basis of those
    directions per block (every direction of a block that reaches none)."""
    from gradcli.verdicts import symmetric
    from gradcli.verdicts.culprit import ModelGraph

    try:
        graph = ModelGraph(model)
        bases, readers = [], []
        for block in objective.blocks:
            ends = symmetric.path_ends(graph, list(objective.cotangents), block.name, objective.cotangents)
            found = symmetric.symmetric_readers(graph, block.name, ends)
            basis = symmetric.symmetric_directions(graph, block.name, found) if found else None
            if basis is not None:
                readers += [op for op in found if op not in readers]
            bases.append(np.eye(block.size) if basis is None else basis)
    except Exception:  # noqa: BLE001 - graph analysis is a bonus: no note
        return ""
    if not readers:
        return ""
    basis = np.zeros((objective.n, sum(b.shape[1] for b in bases)))
    column = 0
    for block, part in zip(objective.blocks, bases):
        basis[block.offset : block.offset + block.size, column : column + part.shape[1]] = part
        column += part.shape[1]
    spectrum, _, _ = dense_spectrum(basis.T @ H @ basis, zero_tol)
    ops = ", ".join(dict.fromkeys(f"{op.type} at {graph.location(op) or op.name}" for op in readers))
    return (
        f"restricted to the {column} of {objective.n} directions that move the matrix {ops} reads "
        f"symmetrically (its domain), the Hessian is {spectrum.verdict} (eigenvalues "
        f"{spectrum.smallest:.6g} to {spectrum.largest:.6g})"
    )


def _require_finite(H, model, what):
    if not np.all(np.isfinite(H)):
        raise ModelError(f"{model.name}: {what} has NaN or Inf entries at the given point")


def sample_region(objective: Objective, center: Spectrum, options: HessianOptions, method) -> Sampling:
    """Extreme eigenvalues at ``samples`` points theta0 + radius * max(1, |theta0|) * u,
    u uniform in [-1, 1]^n (every differentiated element perturbed independently,
    by up to ``radius`` where |theta0| <= 1 and by that fraction of itself beyond:
    the rule of the check's ``samples`` option, so a radius means the same in both, for
    small and large parameters), drawn from ``rng_seed``.

    Sampling can only refute convexity (find a negative eigenvalue), never prove it.
    """
    rng = np.random.default_rng([options.rng_seed, 1])
    n = objective.n
    smallest, largest = np.full(options.samples, np.nan), np.full(options.samples, np.nan)
    points = []
    nonfinite = 0
    half_width = options.radius * np.maximum(1.0, np.abs(objective.theta0))
    for s in range(options.samples):
        progress.report("region sampling", s, options.samples, f"{int(np.sum(smallest[:s] < -center.zero_tol))} with a negative eigenvalue")
        theta = objective.theta0 + half_width * rng.uniform(-1.0, 1.0, n)
        points.append(theta)
        if method == "dense":
            H = objective.dense_hessian(theta)
            if not np.all(np.isfinite(H)):
                nonfinite += 1
                continue
            spectrum = dense_spectrum(H, options.zero_tol)[0]
        else:
            spectrum = lanczos_spectrum(objective, theta, 1, options.tol, rng, options.zero_tol)[0]
        smallest[s], largest[s] = spectrum.smallest, spectrum.largest
    progress.report("region sampling", options.samples, options.samples)
    # One zero tolerance for the region: the point's own (or the ``zero_tol`` option).
    tol = center.zero_tol
    all_small = np.concatenate([[center.smallest], smallest])
    all_large = np.concatenate([[center.largest], largest])
    all_points = [objective.theta0] + points
    finite = np.isfinite(all_small)
    witness_for = options.expect or "convex"
    if witness_for == "convex":
        worst = int(np.nanargmin(all_small))
    else:
        worst = int(np.nanargmax(all_large))
    return Sampling(
        samples=options.samples, radius=options.radius, rng_seed=options.rng_seed,
        rule=f"uniform in theta0 +- {options.radius:g} * max(1, |theta0|) (each element independently), "
        f"numpy default_rng([{options.rng_seed}, 1])",
        n_negative=int(np.sum(all_small[finite] < -tol)),
        n_positive=int(np.sum(all_large[finite] > tol)),
        n_nonfinite=nonfinite,
        worst=SamplePoint(
            values=objective.values(all_points[worst]),
            smallest=float(all_small[worst]), largest=float(all_large[worst]),
            verdict=classify(all_small[worst], all_large[worst], tol),
        ),
        witness_for=witness_for,
        smallest=smallest, largest=largest,
    )


def _judge(result: HessianResult, expect: str) -> None:
    sampling = result.sampling
    spectrum = result.spectrum
    where = "at the point"
    if sampling is not None:
        bad = sampling.n_negative if expect == "convex" else sampling.n_positive
        samples = f"{sampling.samples} sample{'s' * (sampling.samples != 1)}"
        where = f"at {bad} of {sampling.samples + 1} points (the given one and {samples})"
        ok = bad == 0
    else:
        ok = meets(spectrum.verdict, expect)
    sign = "negative" if expect == "convex" else "positive"
    result.expectation_met = ok
    if ok:
        result.expectation_reason = (
            f"no {sign} eigenvalue beyond the zero tolerance {spectrum.zero_tol:.3g} "
            + ("at any sampled point (sampling can refute convexity, not prove it)"
               if expect == "convex" and sampling else
               "at any sampled point (sampling can refute concavity, not prove it)"
               if sampling else "at the point")
        )
    else:
        result.expectation_reason = (
            f"expected {expect}, but the Hessian has a {sign} eigenvalue {where}"
        )


def slice_along(objective, theta, direction, eigenvalue, width, gradient, points: int = 81) -> Slice:
    """f along the unit eigenvector of the smallest eigenvalue, t in [-width, width]."""
    direction = direction / np.linalg.norm(direction)
    ts = np.linspace(-width, width, points)
    return Slice(
        eigenvalue=float(eigenvalue), direction=direction, t=ts,
        values=objective.values_along(theta, direction, ts),
        slope=float(gradient @ direction),
    )
