"""Configuration: ``[tool.gradcli]`` in the nearest pyproject.toml, and a model
file's own ``check`` dict.

Precedence, lowest first (each level overrides the ones before it):

1. the built-in defaults of each option;
2. ``[tool.gradcli]`` in the nearest pyproject.toml (keys shared by every command);
3. ``[tool.gradcli.<command>]`` in the same file (keys for one command);
4. the model file's ``check = {...}`` dict (per model, ``gradcli check`` only);
5. the command line (or the keyword arguments of ``gradcli.check(...)``).

Keys are spelled like the long options, with dashes or underscores
(``rng-seed`` or ``rng_seed``); ``paths`` lists the MODEL arguments used when
none is given. Relative ``paths`` and ``junit-xml`` are relative to the folder
of the pyproject.toml, as other tools read their settings.

This module reads files and validates model-file settings against the fields
of an options dataclass; casting pyproject values to the type of each command
line option happens in ``gradcli.cli.command`` (it knows the options).
Every problem is a one-line :class:`~gradcli.errors.UsageError` (exit 2).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from dataclasses import dataclass, field

from gradcli.errors import UsageError
from gradcli.options import coerce
from gradcli.model.paths import relative_path

PYPROJECT = "pyproject.toml"
#: Keys whose values are paths, resolved against the pyproject.toml's folder.
PATH_KEYS = ("paths", "junit_xml")
#: Command-line option names whose options-dataclass field differs:
#: name -> (field, convert value).
FIELD_OF_OPTION = {
    "native_dtype": ("float64", lambda v: not v),
    "xla": ("jit_compile", lambda v: v),
    "plot": ("slice", bool),  # hessian: a plot needs the slice along the lowest eigenvector
}
#: Options a model file's ``check`` dict may not set, and why.
NOT_PER_MODEL = {
    "wrt": "set `wrt` in the model file itself",
    "set": "change `inputs` in the model file itself",
    "overrides": "change `inputs` in the model file itself",
    "input": "give a model file's data in `inputs`",
    "data": "give a model file's data in `inputs`",
    "timeout": "its worker is stopped by the run, which does not read the model file",
}
RUN_WIDE = ("paths", "jobs", "fail_fast", "shard", "summary", "format", "junit_xml", "quiet", "json")


def normalize(key: str) -> str:
    return str(key).replace("-", "_")


def normalize_back(field: str) -> str:
    """A field as a `check` key names it (``rng_seed`` -> ``rng-seed``)."""
    return field.replace("_", "-")


@dataclass
class ProjectConfig:
    """The ``[tool.gradcli]`` table of one pyproject.toml (keys normalized)."""

    path: str | None = None  # None: no pyproject.toml with [tool.gradcli] was found
    shared: dict = field(default_factory=dict)
    commands: dict[str, dict] = field(default_factory=dict)

    def for_command(self, name: str) -> dict:
        """Shared keys overridden by the ``[tool.gradcli.<name>]`` table."""
        return {**self.shared, **self.commands.get(name, {})}

    def where(self, key: str, command: str | None = None) -> str:
        """``pyproject.toml [tool.gradcli] rtol``: how error messages name a key."""
        table = "tool.gradcli" + (
            f".{command}" if command and key in self.commands.get(command, {}) else ""
        )
        return f"{relative_path(self.path)} [{table}] {key.replace('_', '-')}"


def find_pyproject(start: str | None = None) -> str | None:
    """The nearest pyproject.toml, from ``start`` (the current folder) upwards,
    that has a ``[tool.gradcli]`` table. Like ruff, a pyproject.toml without
    the table is passed over, so a project's tool settings are found from any
    of its subfolders."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, PYPROJECT)
        if os.path.isfile(candidate) and "gradcli" in _read_toml(candidate).get("tool", {}):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_project_config(start: str | None = None) -> ProjectConfig:
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    table = _read_toml(path)["tool"]["gradcli"]
    if not isinstance(table, dict):
        raise UsageError(f"{relative_path(path)}: [tool.gradcli] must be a table")
    config = ProjectConfig(path=path)
    base = os.path.dirname(path)
    for key, value in table.items():
        if isinstance(value, dict):
            config.commands[key] = {
                normalize(k): _resolve(normalize(k), v, base) for k, v in value.items()
            }
        else:
            config.shared[normalize(key)] = _resolve(normalize(key), value, base)
    return config


def _read_toml(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{relative_path(path)}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        raise UsageError(
            f"{relative_path(path)}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise UsageError(f"{relative_path(path)}: cannot read: {exc.strerror}") from None


def _resolve(key: str, value, base: str):
    if key not in PATH_KEYS:
        return value
    if key == "paths" and isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return [os.path.join(base, v) if isinstance(v, str) else v for v in value]
    return os.path.join(base, value) if isinstance(value, str) else value


def option_fields(names) -> set[str]:
    """Command-line parameter names -> the options-dataclass fields they set."""
    return {FIELD_OF_OPTION.get(n, (n, None))[0] for n in names}


def options_from_params(cls, params: dict):
    """An options dataclass from command parameters: each field takes the
    parameter of the same name, or the one ``FIELD_OF_OPTION`` maps to it."""
    values = {n: params[n] for n in cls.__dataclass_fields__ if n in params}
    for name, (field_name, convert) in FIELD_OF_OPTION.items():
        if name in params and field_name in cls.__dataclass_fields__:
            values[field_name] = convert(params[name])
    return cls(**values)


# --- a model file's ``check`` dict ---------------------------------------------


def model_options(options, settings: dict, fixed=(), where: str = "model file"):
    """``options`` with a model file's ``check`` settings applied.

    ``options`` is an options dataclass (``CheckOptions``); a setting applies
    unless its field is in ``fixed`` (given on the command line or to the API).
    Keys are option names (``rtol``, ``rng-seed``, ``native-dtype``...) and must
    name a field; values must have the field's type. Returns ``(options,
    applied)`` where ``applied`` maps the option names that took effect to
    their values, for a note in the report.
    """
    if not settings:
        return options, {}
    fields = {f.name for f in dataclasses.fields(options)}
    hints = typing.get_type_hints(type(options))
    changes, applied = {}, {}
    for key, value in settings.items():
        name = normalize(key)
        label = f"{where}: `check` key {key!r}"
        if name in NOT_PER_MODEL:
            raise UsageError(f"{label} cannot be set per model; {NOT_PER_MODEL[name]}")
        if name in RUN_WIDE:
            raise UsageError(
                f"{label} applies to a whole run; set it in [tool.gradcli] or on the command line"
            )
        field_name, convert = FIELD_OF_OPTION.get(name, (name, lambda v: v))
        if field_name not in fields:
            aliased = {f for f, _ in FIELD_OF_OPTION.values()}
            known = sorted((fields - aliased - set(NOT_PER_MODEL)) | set(FIELD_OF_OPTION))
            raise UsageError(f"{label} is not an option (known: {', '.join(known)})")
        try:
            value = coerce(value, hints[field_name], field_name)
        except UsageError as exc:
            raise UsageError(f"{label} {exc.problem}") from None
        if field_name in fixed:
            continue
        changes[field_name] = convert(value)
        applied[name] = value
    try:
        return dataclasses.replace(options, **changes), applied
    except UsageError as exc:
        raise UsageError(f"{where}: `check`: {exc.message(normalize_back)}") from None
