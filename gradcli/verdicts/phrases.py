"""Phrases the diagnoses share when they word a verdict or a warning: a count
with its noun, an element's label, the non-smooth or estimator sites on a path.
Pure text: no rule lives here."""

from __future__ import annotations

#: How many sites (non-smooth ops, estimators) an explanation names: enough
#: to find them, short enough to read.
SITES_NAMED = 3


def count(n: int, noun: str) -> str:
    """``1 element``, ``2 elements``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def label(name: str, index) -> str:
    """``x[0, 2]``; a scalar is its name alone."""
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def site_list(sites) -> str:
    """The descriptions of the first ``SITES_NAMED`` sites, or "" for none."""
    return "; ".join(s.description for s in sites[:SITES_NAMED]) if sites else ""
