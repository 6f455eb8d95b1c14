"""A griffe extension of the documentation site (``mkdocs.yml``): docstrings write their
cross-references as Sphinx roles (``:class:`~ctx_langgraph.memory.LongTermMemory```), which
Markdown would show literally. Each role becomes an optional mkdocs-autorefs link: the name in
code, linked to its reference page when the object has one, plain code when it does not (an
internal helper). ``~`` shows the last component only, as Sphinx does; a relative name
(``:meth:`setup```) is looked up in the object's class, then its module.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:func|class|meth|data|attr|mod|exc|obj|const):`(?P<tilde>~?)(?P<target>[^`]+)`"
)


def _identifier(obj: griffe.Object, target: str) -> str:
    target = target.strip().removesuffix("()")
    if target.startswith("ctx_langgraph"):
        return target
    # relative: the object's own members, its class's, its module's
    scopes = [obj, obj.parent, obj.module] if obj.parent is not None else [obj, obj.module]
    for scope in scopes:
        if scope is None:
            continue
        head = target.split(".", 1)[0]
        if head in scope.members:
            return f"{scope.path}.{target}"
    return f"{obj.module.path}.{target}"


def convert(text: str, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role turned into an optional autorefs link."""

    def link(match: re.Match[str]) -> str:
        target = match["target"]
        shown = target.strip().rsplit(".", 1)[-1] if match["tilde"] else target.strip()
        identifier = html.escape(_identifier(obj, target), quote=True)
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(shown)}</code></autoref>'

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg)

    def _walk(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value, obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member)  # type: ignore[arg-type]
