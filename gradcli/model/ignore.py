"""Path patterns as git reads them: ``.gitignore`` files and the ``exclude`` and ``include`` options.

One pattern language serves all three, git's (``gitignore(5)``), so a glob
means the same thing in a ``.gitignore``, on the command line and in
``[tool.gradcli]``:

* ``*`` and ``?`` match within one path component, ``[a-z]`` / ``[!a-z]`` one
  character of a set; ``**/`` at the start or between slashes matches zero or
  more folders, a trailing ``/**`` everything inside a folder; a backslash
  escapes the next character;
* a pattern with no slash but a trailing one matches a name at any depth
  (``build``, ``*.py``, ``venv/``); a pattern with a slash at its start or in
  its middle is anchored to the folder of the file that holds it (``/out``,
  ``models/old_*.py``);
* a trailing slash matches folders only; ``!`` in front re-includes what an
  earlier pattern excluded (a file inside an excluded folder stays excluded:
  git never looks inside it, and neither does the folder walk, which prunes
  excluded folders);
* blank lines and lines starting with ``#`` are ignored, as are unescaped
  trailing spaces.

The last pattern that matches decides, and a deeper ``.gitignore`` is read
after (so overrides) the ones above it; ``.git/info/exclude`` counts as a
``.gitignore`` at the repository root. The global git excludes file is not
read: a check should not depend on one user's git configuration.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    """One pattern, anchored at ``base`` (an absolute folder)."""

    text: str
    base: str
    regex: re.Pattern
    negated: bool
    folders_only: bool

    def matches(self, path: str, is_dir: bool) -> bool:
        """Whether ``path`` (absolute) matches: it must lie below ``base``."""
        if self.folders_only and not is_dir:
            return False
        relative = os.path.relpath(path, self.base)
        if relative == "." or relative.startswith(".." + os.sep) or relative == "..":
            return False
        return self.regex.fullmatch(relative.replace(os.sep, "/")) is not None


def parse(line: str, base: str) -> Pattern | None:
    """The pattern of one line of a ``.gitignore`` in ``base`` (or of one
    ``exclude`` glob relative to ``base``); None for blank and comment lines."""
    line = line.rstrip("\n\r")
    if not line or line.startswith("#"):
        return None
    while line.endswith(" ") and not line.endswith("\\ "):  # unescaped trailing spaces
        line = line[:-1]
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    folders_only = line.endswith("/") and not line.endswith("\\/")
    body = line.rstrip("/") if folders_only else line
    if not body:
        return None
    anchored = "/" in body
    body = body[1:] if body.startswith("/") else body
    prefix = "" if anchored else "(?:.*/)?"
    return Pattern(line, os.path.abspath(base), re.compile(prefix + _translate(body), re.DOTALL),
                   negated, folders_only)


def _translate(glob: str) -> str:
    """A gitignore glob (no leading ``!`` or ``/``, no trailing ``/``) as a regex."""
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i) and (i == 0 or glob[i - 1] == "/"):
                after = glob[i + 2:i + 3]
                if after == "/":  # `**/`: zero or more folders
                    out.append("(?:[^/]*/)*")
                    i += 3
                    continue
                if after == "":  # trailing `/**`: everything inside
                    out.append(".*")
                    i += 2
                    continue
            out.append("[^/]*")
            while i < n and glob[i] == "*":
                i += 1
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(glob[i]))
        elif c == "[":
            end = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                inner = glob[i + 1:end]
                if inner[:1] in ("!", "^"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def read_patterns(path: str) -> list[Pattern]:
    """The patterns of one ignore file, anchored at its folder (nothing if it
    cannot be read). ``.git/info/exclude`` is anchored at the repository root."""
    base = os.path.dirname(path)
    if base.endswith(os.path.join(".git", "info")):
        base = os.path.dirname(os.path.dirname(base))
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.readlines()
    except OSError:
        return []
    return [p for p in (parse(line, base) for line in lines) if p is not None]


def decide(patterns, path: str, is_dir: bool) -> Pattern | None:
    """The last pattern among ``patterns`` that matches ``path``, if it
    excludes (a matching ``!`` pattern re-includes: None)."""
    last = None
    for pattern in patterns:
        if pattern.matches(path, is_dir):
            last = pattern
    return None if last is None or last.negated else last


class GitIgnore:
    """The ``.gitignore`` files that apply below ``root``, read once each."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self._files: dict[str, list[Pattern]] = {}

    def patterns(self, folder: str) -> list[Pattern]:
        """Every pattern in force inside ``folder``: the ``.gitignore`` files
        from the root down to it (and ``.git/info/exclude`` at the root), in
        the order git reads them. A folder outside the root reads its own."""
        folder = os.path.abspath(folder)
        chain = [folder]
        if os.path.commonpath([folder, self.root]) == self.root:
            while chain[-1] != self.root:
                chain.append(os.path.dirname(chain[-1]))
        found = []
        for place in reversed(chain):
            if place == self.root:
                found += self._read(os.path.join(place, ".git", "info", "exclude"))
            found += self._read(os.path.join(place, ".gitignore"))
        return found

    def _read(self, path: str) -> list[Pattern]:
        if path not in self._files:
            self._files[path] = read_patterns(path) if os.path.isfile(path) else []
        return self._files[path]

    def ignored(self, path: str, is_dir: bool) -> bool:
        path = os.path.abspath(path)
        return decide(self.patterns(os.path.dirname(path)), path, is_dir) is not None
