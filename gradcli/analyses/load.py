"""Loading a model for an analysis: the one way every analysis (and the Python
API) loads one.

``load(spec, options)`` is ``model.loading.load_model`` given the loading
options among the analysis's ``options`` (``LoadOptions.fields_of``: the load
stage receives only what it reads), and the verdicts' account of why a
model's gradient does not run in float64 (``verdicts.gradient_failure``, which
traces the model's graph to name the op): the model package decides the dtype
but never judges, so the judging is handed to it from here.
"""

from __future__ import annotations

from gradcli.options import LoadOptions


def load(spec, options, **changes):
    """The model ``spec`` names, loaded with the loading options of ``options``
    (any analysis's options dataclass) and ``changes`` to them. A function a
    warm check keeps a program of is not traced again to learn that it runs
    no stateful op (``check.warm.stateless``); a load that took that word and
    fails (its forward pass now draws random numbers, unseeded) is taken again
    without it, traced and seeded as a first load is."""
    from gradcli.analyses.check import warm
    from gradcli.errors import GradcliError
    from gradcli.model.loading import load_model
    from gradcli.verdicts.gradient_failure import describe_gradient_failure

    fields = {**LoadOptions.fields_of(options), **changes}
    vouched = []

    def stateless(model) -> bool:
        if warm.stateless(model):
            vouched.append(model)
        return bool(vouched)

    try:
        return load_model(spec, **fields, explain_failure=describe_gradient_failure, stateless=stateless)
    except GradcliError:
        if not vouched:
            raise
        warm.unvouch(vouched[0])
    return load_model(spec, **fields, explain_failure=describe_gradient_failure)
