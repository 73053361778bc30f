"""JSON documents of ``forward``, ``vjp``, ``jvp`` and ``jacobian`` (schema in the README)."""

from __future__ import annotations

from gradcli.render.json import SCHEMA_VERSION, _plain


def inspect_document(command: str, result) -> dict:
    """``{"schema", "command", ...every field of the result}``; arrays become nested lists."""
    return {"schema": SCHEMA_VERSION, "command": command, **_plain(result)}
