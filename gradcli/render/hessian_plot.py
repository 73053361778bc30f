"""``gradcli hessian --plot FILE.png``. Reads ``HessianResult`` only."""

from __future__ import annotations

import numpy as np

from gradcli.results.hessian import HessianResult


def save_plot(result: HessianResult, path: str) -> None:
    """Two panels: the eigenvalues (symlog axis, Lanczos residuals as error bars)
    and f along the eigenvector of the smallest eigenvalue with its quadratic model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spectrum = result.spectrum
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    values = np.asarray(spectrum.eigenvalues)
    index = np.arange(len(values))
    if spectrum.residuals is not None:
        left.errorbar(index, values, yerr=spectrum.residuals, fmt="o", ms=4)
        left.set_xlabel("Ritz value (smallest ... largest)")
    else:
        left.plot(index, values, "o", ms=4)
        left.set_xlabel("index (ascending)")
    left.axhline(0.0, color="grey", lw=0.8)
    left.axhspan(-spectrum.zero_tol, spectrum.zero_tol, color="grey", alpha=0.2)
    # Linear within half the smallest nonzero |lambda|, logarithmic beyond: decades
    # start where the eigenvalues do instead of at round-off level.
    nonzero = np.abs(values)[np.abs(values) > spectrum.zero_tol]
    top = float(np.abs(values).max(initial=1.0))
    linthresh = max(0.5 * float(nonzero.min()) if nonzero.size else top, 1e-6 * top, 1e-300)
    left.set_yscale("symlog", linthresh=linthresh)
    left.set_ylabel("eigenvalue")
    left.set_title(f"Hessian spectrum: {spectrum.verdict}")
    cut = result.slice
    if cut is not None:
        right.plot(cut.t, cut.values, label="f(theta + t v)")
        quadratic = cut.values[len(cut.t) // 2] + cut.slope * cut.t + 0.5 * cut.eigenvalue * cut.t**2
        right.plot(cut.t, quadratic, "--", label=f"quadratic model, lambda = {cut.eigenvalue:.4g}")
        right.set_xlabel("t (v: eigenvector of the smallest eigenvalue)")
        right.set_ylabel("f")
        right.legend()
        right.set_title("1-D slice along the lowest curvature")
    fig.suptitle(result.name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
