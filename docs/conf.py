"""Sphinx configuration for gradcli's documentation (Markdown pages, read by MyST).

Build: ``pip install '.[docs]' && sphinx-build -W --keep-going -b html docs SITE``.
``-W`` makes every warning an error, so a link to a missing page or heading,
a page left out of the table of contents, or bad markup fails the build (CI runs it).
The pages under ``reference/`` marked "Generated" come from ``docs/gen_reference.py``.
"""

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # autodoc documents this checkout, not an installed copy

project = "gradcli"
author = "the gradcli authors"
release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "gen_reference.py"]

# Headings up to ### get anchors, so [text](page.md#heading) links are checked too.
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]

# Importing gradcli does not import TensorFlow (the API imports it when called),
# so autodoc runs without it; the docs build stays a few seconds.
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = f"gradcli {release}"
