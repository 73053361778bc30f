"""Options of every analysis, validated once, where they are declared.

Each analysis declares its options as a dataclass deriving from ``Options``
(``CheckOptions``, ``HessianOptions``, ``LogdetOptions``, ``LoadOptions``).
Building one checks every field against its type hint and then the range rules
below, whoever builds it: the command line, ``[tool.gradcli]``, a model file's
``check`` dict or a keyword argument of the Python API. A bad value raises
``UsageError(problem, param=FIELD)``, so the API names the keyword
(``rtol must be >= 0, got -1.0``) and the command line the flag that set it.

Rules shared by every analysis are keyed by field name, so a field means the
same thing everywhere: ``rtol``/``atol`` finite and >= 0, ``rng_seed`` a
32-bit unsigned integer (numpy and TensorFlow seeds), ``wrt`` names without
repeats (a repeated input would be compared against itself).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from dataclasses import dataclass, field

from gradcli.errors import UsageError

#: numpy's SeedSequence takes any non-negative int, TensorFlow's global seed a
#: signed 64-bit one; 32 bits is what both accept everywhere and what users type.
SEED_LIMIT = 2**32


def require(ok: bool, param: str, problem: str) -> None:
    if not ok:
        raise UsageError(problem, param=param)


def finite_at_least(value, param: str, low: float = 0.0, strict: bool = False) -> None:
    """``value`` (None allowed) is finite and >= low (> low when ``strict``)."""
    if value is None:
        return
    require(math.isfinite(value), param, f"must be finite, got {value}")
    if strict:
        require(value > low, param, f"must be > {low:g}, got {value}")
    else:
        require(value >= low, param, f"must be >= {low:g}, got {value}")


def int_at_least(value: int, param: str, low: int) -> None:
    require(value >= low, param, f"must be at least {low}, got {value}")


def one_of(value, param: str, choices) -> None:
    require(value in choices, param, f"must be one of {', '.join(map(str, choices))}, got {value!r}")


def unique_names(names, param: str) -> None:
    if names is None or isinstance(names, str):
        return
    seen, repeated = set(), []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    require(not repeated, param, f"names {', '.join(map(repr, repeated))} more than once")


@functools.lru_cache(maxsize=None)
def type_hints(cls) -> dict:
    """``typing.get_type_hints(cls)``, resolved once a class (a class's annotations
    do not change; resolving them took a third of a millisecond a call). Read only."""
    return typing.get_type_hints(cls)


@dataclasses.dataclass
class Options:
    """Base of every options dataclass: type checks, shared rules, then ``validate``."""

    def __post_init__(self):
        hints = type_hints(type(self))
        for f in dataclasses.fields(self):
            setattr(self, f.name, coerce(getattr(self, f.name), hints[f.name], f.name))
        for name in ("rtol", "atol"):
            if hasattr(self, name):
                finite_at_least(getattr(self, name), name)
        if hasattr(self, "rng_seed"):
            seed = self.rng_seed
            require(0 <= seed < SEED_LIMIT, "rng_seed", f"must be between 0 and 2**32 - 1, got {seed}")
        if hasattr(self, "wrt"):
            unique_names(self.wrt, "wrt")
        if getattr(self, "max_memory", None) is not None:
            require(self.max_memory > 0, "max_memory", f"must be a positive number of bytes, got {self.max_memory}")
        self.validate()

    def validate(self) -> None:
        """Rules of one analysis (ranges, combinations); override."""


def coerce(value, hint, param: str):
    """``value`` checked against a field's type hint (``float | None``, ``int``,
    ``bool``, ``str``, ``list[str] | None``, ``dict``); ints widen to float,
    nothing else converts (a JSON ``true`` is no number, ``1.5`` no count)."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _union_type()) else (hint,)
    if value is None and type(None) in args:
        return None
    for kind in args:
        origin = typing.get_origin(kind) or kind
        if origin is bool and isinstance(value, bool):
            return value
        if isinstance(value, bool):
            continue
        if origin is float and isinstance(value, (int, float)):
            return float(value)
        if origin is int and isinstance(value, int):
            return value
        if origin is str and isinstance(value, str):
            return value
        if origin is list and isinstance(value, (list, tuple)):
            item = (typing.get_args(kind) or (object,))[0]
            if item is object or all(isinstance(v, item) for v in value):
                return list(value)
        if origin is dict and isinstance(value, dict):
            return value
    wanted = " or ".join(_type_name(k) for k in args if k is not type(None))
    raise UsageError(f"must be {wanted}, got {value!r}", param=param)


def _union_type():
    import types

    return types.UnionType


def _type_name(kind) -> str:
    origin = typing.get_origin(kind)
    if origin is list:
        item = typing.get_args(kind)
        return f"a list of {item[0].__name__}" if item else "a list"
    if origin is dict or kind is dict:
        return "a dict"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        kind, getattr(kind, "__name__", str(kind))
    )


# --- loading a model (every command) ---------------------------------------------


@dataclass
class LoadOptions(Options):
    """How a model is loaded (``gradcli.model.loading.load_model``)."""

    wrt: list[str] | None = None  # inputs to differentiate (None: every floating input)
    set: dict = field(default_factory=dict)  # input name -> array, replacing the model's own
    rng_seed: int = 0
    native_dtype: bool = False  # check in the model's own dtype (else floating inputs go float64)
    input: dict = field(default_factory=dict)  # the data of a .keras model or SavedModel
    imports: list[str] = field(default_factory=list)  # modules or .py files imported before loading
    loss: str | None = None  # a .keras model's loss: "compiled" or a Keras loss name

    @classmethod
    def fields_of(cls, options) -> dict:
        """The loading options among an analysis's ``options`` (the fields of
        the same names): what ``load_model`` takes, and all it is given."""
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(cls) if hasattr(options, f.name)}


# --- gradcli check ---------------------------------------------------------------

MODES = ("auto", "full", "fast")
AUTODIFF_MODES = ("both", "reverse")
#: auto runs the full check when it is predicted to take at most this many
#: seconds: about what a user waits for a check without reaching for options.
DEFAULT_BUDGET = 10.0


@dataclass
class CheckOptions(Options):
    """What ``gradcli check`` does; validated on construction (``gradcli.options``)."""

    mode: str = "auto"
    rtol: float | None = None
    atol: float | None = None
    probes: int = 3
    rng_seed: int = 0
    wrt: list[str] | None = None
    set: dict = field(default_factory=dict)  # input name -> array, replacing the model's own
    input: dict = field(default_factory=dict)  # the data of a .keras model or SavedModel
    imports: list[str] = field(default_factory=list)  # modules or .py files imported before loading
    loss: str | None = None  # a .keras model's loss: "compiled" or a Keras loss name
    native_dtype: bool = False  # check in the model's own dtype (else floating inputs go float64)
    xla: bool | None = None  # None: XLA where it pays (numerics.in_place.XLA_PAYS_SECONDS)
    order: int = 1  # 2: also check second derivatives (gradcli.analyses.second_order)
    allow_surrogate: bool = False  # a surrogate (straight-through) gradient passes
    #: Which automatic differentiation modes are checked: "both" (reverse mode,
    #: element by element or by probes, and forward mode by random probes: see
    #: ``analyses.check``), or "reverse" (forward mode off, said in a note).
    autodiff: str = "both"
    taylor: bool = False  # run the Taylor remainder test on every pair
    # Sweep (gradcli.analyses.sweep): check again at ``samples`` seeded random
    # points within ``radius`` * max(1, |x|), and with ``special`` at structured points.
    samples: int = 0
    radius: float = 0.1
    special: bool = False
    fail_on: list[str] = field(default_factory=list)  # verdicts that fail (results.FAIL_ON_WORDS)
    keep_blocks: bool = False  # failing pairs keep a window of their Jacobian blocks (--plot)
    max_memory: int | None = None  # bytes; None: gradcli.memory.SAFE_FRACTION of available
    #: auto: seconds a full check may take (predicted); fast: seconds the
    #: element-wise re-check of a failing pair may take (else a sample of its elements)
    budget: float = DEFAULT_BUDGET
    #: Seconds a model file may run in its worker before it is stopped and
    #: reported as an error row (``workers.batch.supervise``); None: no limit.
    timeout: float | None = None
    #: The layer-by-layer pass of a Keras model or a network of tf.Modules (``analyses.layers``): None
    #: runs it in auto mode when the full check does not fit ``budget``; True
    #: always; False never.
    by_layer: bool | None = None
    #: Check only the layers whose name or path matches one of these names or
    #: globs (``conv2_block*``); implies ``by_layer``.
    layers: list[str] | None = None

    def validate(self):
        from gradcli.results.words import FAIL_ON_WORDS, SURROGATE

        one_of(self.mode, "mode", MODES)
        one_of(self.autodiff, "autodiff", AUTODIFF_MODES)
        int_at_least(self.probes, "probes", 1)
        one_of(self.order, "order", (1, 2))
        int_at_least(self.samples, "samples", 0)
        finite_at_least(self.radius, "radius", strict=True)
        finite_at_least(self.budget, "budget")
        finite_at_least(self.timeout, "timeout", strict=True)
        for word in self.fail_on:
            one_of(word, "fail_on", FAIL_ON_WORDS)
        unique_names(self.fail_on, "fail_on")
        if self.layers is not None:
            require(all(n.strip() for n in self.layers) and self.layers, "layers",
                    "must name at least one layer (a name, a path or a glob)")
            if self.by_layer is False:
                raise UsageError("selects layers for the layer-by-layer pass, which "
                                 "{@by_layer} turns off: choose one", param="layers", bad_value=False)
        if self.allow_surrogate and SURROGATE in self.fail_on:
            raise UsageError(
                "lists surrogate, which {@allow_surrogate} lets pass: choose one",
                param="fail_on", bad_value=False,
            )


# --- gradcli hessian -------------------------------------------------------------

METHODS = ("auto", "dense", "lanczos")
EXPECTATIONS = ("convex", "concave")
#: Lanczos stops when every wanted Ritz value has residual <= tol * max|theta|.
LANCZOS_TOL = 1e-8
#: Rademacher probes for Hutchinson's trace estimate.
TRACE_PROBES = 32


@dataclass
class HessianOptions(Options):
    """What ``gradcli hessian`` does; validated on construction (``gradcli.options``)."""

    wrt: list[str] | None = None
    set: dict = field(default_factory=dict)
    cotangents: dict = field(default_factory=dict)
    method: str = "auto"
    top: int = 3
    samples: int = 0
    radius: float | None = None
    rng_seed: int = 0
    expect: str | None = None
    zero_tol: float | None = None
    tol: float = LANCZOS_TOL
    trace_probes: int = TRACE_PROBES
    fd_check: bool = True
    rtol: float | None = None
    atol: float | None = None
    slice: bool = False  # compute the 1-D slice along the lowest eigenvector (for --plot)
    native_dtype: bool = False
    max_memory: int | None = None  # bytes; None: gradcli.memory.SAFE_FRACTION of available

    def validate(self):
        one_of(self.method, "method", METHODS)
        if self.expect is not None:
            one_of(self.expect, "expect", EXPECTATIONS)
        int_at_least(self.top, "top", 1)
        int_at_least(self.samples, "samples", 0)
        int_at_least(self.trace_probes, "trace_probes", 2)
        finite_at_least(self.radius, "radius", strict=True)
        finite_at_least(self.zero_tol, "zero_tol")
        require(0 < self.tol < 1, "tol", f"must be between 0 and 1, got {self.tol}")
        if self.samples and self.radius is None:
            raise UsageError("needs {@radius} (the half-width of the box to sample)", param="samples", bad_value=False)
        if self.radius is not None and not self.samples and not self.slice:
            raise UsageError(
                "needs {@samples} N (or {@slice}, where it sets the slice width)", param="radius", bad_value=False
            )


# --- gradcli logdet --------------------------------------------------------------


@dataclass
class LogdetOptions(Options):
    """What ``gradcli logdet`` does; validated on construction."""

    wrt: str | None = None  # the input x of y = f(x) (None: the only floating input)
    output: str | None = None  # the output y (None: the only floating output)
    rtol: float | None = None
    atol: float | None = None
    set: dict = field(default_factory=dict)
    rng_seed: int = 0
    max_memory: int | None = None  # bytes; None: gradcli.memory.SAFE_FRACTION of available
