"""The verdict words and their one-line explanations: the one leaf module
every layer may import (options validate ``fail_on`` against them, verdicts
set them, renderers colour them). Only ``gradcli.verdicts`` sets a verdict."""

#: Verdict words. A verdict in FAILING makes the check exit 1.
PASS = "pass"
MISMATCH = "mismatch"
ZERO = "zero"
DISCONNECTED = "disconnected"
INCONCLUSIVE = "inconclusive"
KINK = "kink"
SURROGATE = "surrogate"

#: Verdicts a user may make fail (``CheckOptions.fail_on``). By default ``zero``,
#: a silent ``disconnected`` and a ``kink`` with a valid subgradient pass (the
#: gradient TensorFlow returns is right), ``surrogate`` fails unless allowed and
#: ``inconclusive`` always fails; CI that must not train through such a path
#: lists them.
FAIL_ON_WORDS = (ZERO, KINK, SURROGATE, DISCONNECTED, INCONCLUSIVE)

EXPLANATIONS = {
    PASS: "analytic and numeric derivatives agree within tolerance",
    MISMATCH: "the analytic derivative disagrees with finite differences beyond tolerance",
    ZERO: "the derivative is identically zero: nothing can be learned through this path",
    DISCONNECTED: "TensorFlow returns no gradient (None) for this input",
    INCONCLUSIVE: "finite differences are too noisy here to confirm the gradient",
    KINK: "the point sits on a non-differentiability: the one-sided slopes disagree",
    SURROGATE: (
        "the function is piecewise constant here while the analytic gradient is not, and a "
        "straight-through estimator on the path gives it: a surrogate gradient"
    ),
}


#: A note names at most this many inputs or layers, then counts the rest: a
#: ResNet-50 promotes 214 weights, and a note listing them all buries the report.
LISTED_NAMES = 8


def name_list(names, listed: int = LISTED_NAMES) -> str:
    """``a, b, c`` for a few names; the first ``listed`` and ``and N more`` past that."""
    names = list(names)
    if len(names) <= listed:
        return ", ".join(names)
    return f"{', '.join(names[:listed])} and {len(names) - listed} more"
