"""``gradcli check``: compare analytic derivatives with finite differences.

The modes and their rules are in ``rules``' docstring (``full``, ``fast``,
``auto``). The package: ``rules`` (the modes and the constants they read),
``model`` (``check_spec``, ``check_model``: loading under a model file's own
settings, the mode, the layer pass beside the whole-model check), ``mode``
(auto's choice, the memory guards), ``full``, ``fast`` and ``joint`` (the
three checks), ``products`` (where their VJPs and JVPs come from: a caller
holding them passes its own provider), ``precision`` (the dtype the steps and
tolerances follow) and ``raised`` (whose exception it is). Model files are run
in workers by ``gradcli.workers``, which imports this package, never the other
way round.
"""

from gradcli.analyses.check.fast import FastCheck
from gradcli.analyses.check.full import FullCheck, block_window
from gradcli.analyses.check.joint import JointCheck, joint_input
from gradcli.analyses.check.mode import choose_mode
from gradcli.analyses.check.model import check_layers, check_model, check_spec
from gradcli.analyses.check.products import ModelProducts
from gradcli.analyses.check.rules import (
    CLEARLY_OVER,
    COTANGENT_SCALES,
    FORWARD_CHECKED,
    FORWARD_PROBES,
    JOINT_FORWARD_PROBES,
    JOINT_LIMIT,
    JOINT_STAGE,
    MIN_SAMPLED,
    ROUNDOFF_RETRY,
    TRACE_SPEEDUP,
    UNEXPLAINED_BUDGETS,
    WINDOW,
)
from gradcli.options import CheckOptions

__all__ = [
    "CLEARLY_OVER", "COTANGENT_SCALES", "FORWARD_CHECKED", "FORWARD_PROBES", "JOINT_FORWARD_PROBES",
    "JOINT_LIMIT", "JOINT_STAGE", "MIN_SAMPLED", "ROUNDOFF_RETRY", "TRACE_SPEEDUP", "UNEXPLAINED_BUDGETS",
    "WINDOW", "CheckOptions", "FastCheck", "FullCheck", "JointCheck", "ModelProducts", "block_window",
    "check_layers", "check_model", "check_spec", "choose_mode", "joint_input",
]
