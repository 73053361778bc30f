"""Configuration: ``[tool.gradcli]`` of the project's pyproject.toml, and a
model file's own ``check`` dict.

Which file (``find_pyproject``, in ``gradcli.model.project``), as ruff and pytest find theirs: from the
working folder upwards, the first ``pyproject.toml`` found ends the search,
with or without a ``[tool.gradcli]`` table (without one, the project has no
gradcli settings and the defaults apply); so does the repository root (a
folder holding ``.git``, a folder or a file), and so does a ``stop`` folder
given by the caller (the pytest plugin gives pytest's rootdir). Nothing above
that boundary is read: a table in a parent folder of a checkout cannot change
how the checkout is checked. ``config_file`` names the file instead (a
pyproject.toml, whose ``[tool.gradcli]`` table is read, or a gradcli TOML
file, whose top level is that table); ``isolated`` reads none.

Precedence, lowest first (each level overrides the ones before it):

1. the built-in defaults of each option;
2. ``[tool.gradcli]`` of that file (keys shared by every command);
3. ``[tool.gradcli.<command>]`` in the same file (keys for one command);
4. the model file's ``check = {...}`` dict (per model, ``gradcli check`` only);
5. the command line (or the keyword arguments of ``gradcli.check(...)``).

Keys are spelled like the long options, with dashes or underscores
(``rng-seed`` or ``rng_seed``); ``paths`` lists the MODEL arguments used when
none is given. Relative ``paths`` and output files (``PATH_KEYS``) are
relative to the folder of the file that sets them, as other tools read their
settings, and must lie inside its project (``project_root``: the repository
root holding the file, else the file's own folder): a configuration speaks for
its own project, so it may neither check models nor write reports elsewhere.

This module reads files and validates model-file settings against the fields
of an options dataclass; casting configured values to the type of each command
line option happens in ``gradcli.cli.command`` (it knows the options).
Every problem is a one-line :class:`~gradcli.errors.UsageError` (exit 2).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field

from gradcli.errors import UsageError
from gradcli.options import coerce, type_hints
from gradcli.model.paths import relative_path
# The search for the project's pyproject.toml, shared with model imports:
from gradcli.model.project import PYPROJECT, REPOSITORY_MARKER, find_pyproject, repository_root  # noqa: F401

#: Keys whose values are paths, resolved against the configuration file's
#: folder and kept inside its project.
PATH_KEYS = ("paths", "junit_xml", "summary", "save", "plot")
#: Options a model file's ``check`` dict may not set, and why.
NOT_PER_MODEL = {
    "wrt": "set `wrt` in the model file itself",
    "set": "change `inputs` in the model file itself",
    "input": "give a model file's data in `inputs`",
    "timeout": "its worker is stopped by the run, which does not read the model file",
    "imports": "import the module in the model file itself",
    "loss": "set `loss` in the model file itself",
}
RUN_WIDE = ("paths", "jobs", "fail_fast", "shard", "summary", "format", "junit_xml", "quiet", "json",
            "include", "exclude")


def normalize(key: str) -> str:
    return str(key).replace("-", "_")


def normalize_back(field: str) -> str:
    """A field as a `check` key names it (``rng_seed`` -> ``rng-seed``)."""
    return field.replace("_", "-")


@dataclass
class ProjectConfig:
    """The gradcli table of one configuration file (keys normalized).

    ``path`` is the file whose settings apply (None: no settings, the
    defaults); ``table`` how its settings table is named in messages
    (``tool.gradcli`` in a pyproject.toml, empty in a gradcli TOML file);
    ``origin`` says in words how the file was chosen, or why there is none.
    """

    path: str | None = None
    shared: dict = field(default_factory=dict)
    commands: dict[str, dict] = field(default_factory=dict)
    table: str = "tool.gradcli"
    origin: str = ""

    def for_command(self, name: str) -> dict:
        """Shared keys overridden by the ``[tool.gradcli.<name>]`` table."""
        return {**self.shared, **self.commands.get(name, {})}

    def where(self, key: str, command: str | None = None) -> str:
        """``pyproject.toml [tool.gradcli] rtol``: how error messages name a key."""
        sub = command if command and key in self.commands.get(command, {}) else ""
        table = ".".join(filter(None, (self.table, sub)))
        return " ".join(filter(None, (relative_path(self.path), f"[{table}]" if table else "", key.replace("_", "-"))))


def project_root(config_path: str) -> str:
    """The folder a configuration file speaks for: the repository root holding
    it, else the file's own folder."""
    folder = os.path.dirname(os.path.abspath(config_path))
    return repository_root(folder) or folder


def load_project_config(
    start: str | None = None, *, config_file: str | None = None, isolated: bool = False,
    stop: str | None = None,
) -> ProjectConfig:
    """The settings in force: none when ``isolated``; those of ``config_file``
    when given (a pyproject.toml without a ``[tool.gradcli]`` table is then an
    error); else those of the pyproject.toml ``find_pyproject`` finds."""
    if isolated:
        return ProjectConfig(origin="none: configuration files are ignored")
    if config_file is not None:
        if not os.path.isfile(config_file):
            raise UsageError(f"{config_file}: no such configuration file")
        data = _read_toml(config_file)
        if os.path.basename(config_file) != PYPROJECT:
            return _config(config_file, data, "", "given")
        if not isinstance(data.get("tool"), dict) or "gradcli" not in data["tool"]:
            raise UsageError(f"{relative_path(config_file)}: no [tool.gradcli] table")
        return _config(config_file, data["tool"]["gradcli"], "tool.gradcli", "given")
    path, boundary = find_pyproject(start, stop)
    searched = f"searched from {os.path.abspath(start or os.getcwd())} up to {boundary}"
    if path is None:
        return ProjectConfig(origin=f"none: no {PYPROJECT} ({searched})")
    tool = _read_toml(path).get("tool", {})
    if not isinstance(tool, dict) or "gradcli" not in tool:
        return ProjectConfig(origin=f"none: {relative_path(path)} has no [tool.gradcli] table ({searched})")
    return _config(path, tool["gradcli"], "tool.gradcli", f"the nearest {PYPROJECT}, {searched}")


def _config(path: str, table, name: str, origin: str) -> ProjectConfig:
    config = ProjectConfig(path=os.path.abspath(path), table=name, origin=origin)
    if not isinstance(table, dict):
        raise UsageError(f"{relative_path(path)}: [{name}] must be a table")
    base, root = os.path.dirname(config.path), project_root(config.path)
    for key, value in table.items():
        if isinstance(value, dict):
            config.commands[key] = {normalize(k): v for k, v in value.items()}
        else:
            config.shared[normalize(key)] = value
    for command in (None, *config.commands):
        values = config.commands[command] if command else config.shared
        for key, value in values.items():
            if key in PATH_KEYS:
                values[key] = _resolve(value, base, root, config.where(key, command))
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


def _resolve(value, base: str, root: str, where: str):
    """A path setting (or a list of them) relative to ``base``, kept inside ``root``."""
    if isinstance(value, list):
        return [_resolve(v, base, root, where) for v in value]
    if not isinstance(value, str):
        return value  # the option's type refuses it later, naming the key
    path = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
    file, _, name = path.rpartition(":")
    checked = file if name.isidentifier() and file and not os.path.exists(path) else path  # FILE.py:NAME
    if os.path.commonpath([checked, root]) != root:
        raise UsageError(
            f"{where}: {value!r} is outside {root}, the project this configuration belongs to"
        )
    return path


def options_from_params(cls, params: dict):
    """An options dataclass from command parameters: each field takes the
    parameter of its name (a field is named as its option)."""
    return cls(**{n: params[n] for n in cls.__dataclass_fields__ if n in params})


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
    hints = type_hints(type(options))
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
        if name not in fields:
            known = sorted(fields - set(NOT_PER_MODEL))
            raise UsageError(f"{label} is not an option (known: {', '.join(known)})")
        try:
            value = coerce(value, hints[name], name)
        except UsageError as exc:
            raise UsageError(f"{label} {exc.problem}") from None
        if name in fixed:
            continue
        changes[name] = value
        applied[name] = value
    try:
        return dataclasses.replace(options, **changes), applied
    except UsageError as exc:
        raise UsageError(f"{where}: `check`: {exc.message(normalize_back)}") from None
