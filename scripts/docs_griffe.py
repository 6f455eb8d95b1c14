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


TWIN = re.compile(r"async_twin\((?P<sync>\w+)\)")


def _flow_methods(cls: griffe.Class) -> None:
    """Show a store's flow methods as what users call: ``@flow_method def m(...) -> Flow[R]``
    returns ``R``, and ``am = async_twin(m)`` is the async method with ``m``'s parameters."""
    for name, member in list(cls.members.items()):
        if member.is_alias:
            continue
        if isinstance(member, griffe.Function) and any(
            str(d.value) == "flow_method" for d in member.decorators
        ):
            returns = member.returns
            if isinstance(returns, griffe.ExprSubscript) and str(returns.left) == "Flow":
                member.returns = returns.slice
        elif isinstance(member, griffe.Attribute) and (twin := TWIN.fullmatch(str(member.value))):
            sync = cls.members.get(twin["sync"])
            if not isinstance(sync, griffe.Function):
                continue
            method = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=sync.parameters,
                returns=sync.returns,
                parent=cls,
                docstring=griffe.Docstring(f"Async twin of :meth:`{sync.name}`."),
            )
            method.labels.add("async")
            method.docstring.parent = method  # type: ignore[union-attr]
            cls.set_member(name, method)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package, and shows flow
    methods as the methods users call."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg)

    def _walk(self, obj: griffe.Object) -> None:
        if isinstance(obj, griffe.Class):
            _flow_methods(obj)
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value, obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member)  # type: ignore[arg-type]
