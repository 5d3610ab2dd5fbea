"""Griffe extension for the API reference: Sphinx roles in docstrings become code spans.

The docstrings cross-reference with Sphinx roles (``:class:`~gymcurric.tasks.Curriculum```),
which Markdown would print verbatim. This turns each into an inline code span of the name a
reader sees (``Curriculum`` for ``~a.b.Curriculum``, the text of ``text <target>``). Loaded
by mkdocstrings (``extensions`` in mkdocs.yml); it changes only the rendered text.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj|const|py:\w+):`([^`]+)`")


def _shown(target: str) -> str:
    explicit = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if explicit:
        return explicit.group(1)
    if target.startswith("~"):
        return target.rsplit(".", 1)[-1]
    return target.lstrip(".")


def replace_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by a code span."""
    return _ROLE.sub(lambda m: f"`{_shown(m.group(1))}`", text)


class SphinxRolesToCode(griffe.Extension):
    """Rewrite the roles of every docstring once the object tree is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring in place."""
        if obj.docstring is not None:
            obj.docstring.value = replace_roles(obj.docstring.value)
