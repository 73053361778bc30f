"""A model file whose import raises: `gradcli check` reports it as an error (exit 3)."""

raise RuntimeError("broken on purpose")
