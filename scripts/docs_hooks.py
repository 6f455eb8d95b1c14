"""MkDocs hooks of the documentation site (``mkdocs.yml``): the reference part, generated from
the code at every build so it cannot drift from it.

- ``reference/api/<module>/``: one page per public module (its docstring and a table of its
  names) and one page per public name (its docstrings, through mkdocstrings). A name exported
  by several modules (``ctx_langgraph.SQLiteHistoryStore`` is ``ctx_langgraph.history``'s) has
  one page, under the first module of :data:`PUBLIC_MODULES` that exports it; the others link
  there. A public name without a docstring is a warning, which ``--strict`` makes an error.
- ``reference/config.md``: ``ContextConfig``'s fields, types, defaults and meanings.
- ``reference/context-channel.md``: the ``context`` channel's keys, from ``ContextReport``'s
  field docstrings (and one level of the reports it holds).
- ``reference/cli.md``: every ``ctx-langgraph`` command's ``--help``, from the parser itself.
- ``reference/errors.md``: the error types, as a tree under ``ContextManagementError``.

The public API is :data:`PUBLIC_MODULES` and their ``__all__``; ``tests/test_docs_site.py``
checks that the list covers every public subpackage and module of ``ctx_langgraph``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import logging
import os
import re
import typing
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import typing_extensions

log = logging.getLogger("mkdocs.plugins.ctx_reference")

PUBLIC_MODULES: tuple[str, ...] = (
    "ctx_langgraph",
    "ctx_langgraph.integration",
    "ctx_langgraph.middleware",
    "ctx_langgraph.wiring",
    "ctx_langgraph.config",
    "ctx_langgraph.state",
    "ctx_langgraph.history",
    "ctx_langgraph.budget",
    "ctx_langgraph.budget.prefix",
    "ctx_langgraph.compaction",
    "ctx_langgraph.compaction.summarizers",
    "ctx_langgraph.usage",
    "ctx_langgraph.usage.node",
    "ctx_langgraph.usage.callbacks",
    "ctx_langgraph.lookup",
    "ctx_langgraph.memory",
    "ctx_langgraph.rules",
    "ctx_langgraph.providers",
    "ctx_langgraph.retention",
    "ctx_langgraph.threads",
    "ctx_langgraph.inspect",
    "ctx_langgraph.embeddings",
    "ctx_langgraph.indexes",
    "ctx_langgraph.makeup",
    "ctx_langgraph.errors",
    "ctx_langgraph.datasets",
    "ctx_langgraph.eval",
    "ctx_langgraph.eval.trace",
    "ctx_langgraph.eval.synthetic",
    "ctx_langgraph.eval.report",
    "ctx_langgraph.eval.demo",
    "ctx_langgraph.testing",
    "ctx_langgraph.display",
    "ctx_langgraph.cli",
)
"""The modules whose ``__all__`` is the public API, in the order the reference lists them."""

INTERNAL_PACKAGES = frozenset({"core", "storage", "view"})
"""Subpackages of ``ctx_langgraph`` that hold the machinery behind the public modules."""

API = "reference/api"


@dataclasses.dataclass(frozen=True)
class Name:
    """One public name as a module exports it, and where its page is."""

    module: str
    name: str
    target: str
    """The object's own path (``ctx_langgraph.history.sqlite.SQLiteHistoryStore``)."""
    kind: str
    summary: str
    page: str
    """The page documenting it, relative to the docs directory."""

    @property
    def identifier(self) -> str:
        return f"{self.module}.{self.name}"


def module_page(module: str) -> str:
    return f"{API}/{module}/index.md"


ROLE = re.compile(r":[a-z]+:`(?P<tilde>~?)(?P<target>[^`]+)`")


def _roles(text: str) -> str:
    """Sphinx roles as optional autorefs links (as ``scripts/docs_griffe.py`` does for the
    docstrings mkdocstrings renders)."""

    def link(match: re.Match[str]) -> str:
        target = match["target"].strip()
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
        if not target.startswith("ctx_langgraph"):
            return f"`{shown}`"
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(link, text)


def _first_line(docstring: str | None) -> str:
    if not docstring:
        return ""
    paragraph = docstring.strip().split("\n\n", 1)[0]
    return _roles(" ".join(paragraph.split()))


def public_names() -> dict[str, list[Name]]:
    """Every public module's names, each with the page it is documented on."""
    import griffe

    package = griffe.load("ctx_langgraph", resolve_aliases=True, resolve_external=False)
    owner: dict[str, str] = {}
    names: dict[str, list[Name]] = {}
    # the top-level package re-exports: its names are documented where they live
    for module in (*PUBLIC_MODULES[1:], PUBLIC_MODULES[0]):
        python_module = importlib.import_module(module)
        exported = getattr(python_module, "__all__", None)
        if not exported:
            log.warning("%s has no __all__: its public names are unknown", module)
            continue
        griffe_module = package if module == "ctx_langgraph" else package[module[14:]]
        entries = []
        for name in exported:
            member = griffe_module[name]
            target = member.final_target if member.is_alias else member
            owner.setdefault(target.path, module)
            page = f"{API}/{owner[target.path]}/{name}.md"
            if not target.docstring:
                log.warning("%s.%s has no docstring", module, name)
            entries.append(
                Name(
                    module=module,
                    name=name,
                    target=target.path,
                    kind=target.kind.value,
                    summary=_first_line(target.docstring.value if target.docstring else None),
                    page=page,
                )
            )
        names[module] = entries
    return {module: names[module] for module in PUBLIC_MODULES if module in names}


def _relative(page: str, start: str) -> str:
    return os.path.relpath(page, str(PurePosixPath(start).parent)).replace(os.sep, "/")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def module_markdown(module: str, entries: list[Name]) -> str:
    """A module's page: its docstring (no members) and a table of its names."""
    page = module_page(module)
    rows = "\n".join(
        f"| [`{entry.name}`]({_relative(entry.page, page)}) | {entry.kind} | {_cell(entry.summary)} |"
        for entry in entries
    )
    return (
        f"# `{module}`\n\n"
        f"::: {module}\n"
        "    options:\n"
        "      members: false\n"
        "      show_root_heading: false\n"
        "      show_root_toc_entry: false\n\n"
        "## Names\n\n"
        "| name | kind | what it is |\n|---|---|---|\n"
        f"{rows}\n"
    )


def name_markdown(entry: Name, exporters: list[str]) -> str:
    """A public name's page: mkdocstrings renders it; the modules exporting it are listed."""
    others = ", ".join(f"`{module}`" for module in exporters)
    return (
        f"::: {entry.identifier}\n\n"
        f"Import it from {others}."
        f" Defined in `{entry.target.rsplit('.', 1)[0]}`.\n"
    )


def _annotation(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    return str(text or annotation).replace("typing.", "")


def config_markdown(names: dict[str, list[Name]]) -> str:
    """``ContextConfig``'s fields: type, default and meaning (from its ``Args:`` section)."""
    import griffe

    from ctx_langgraph.config import ContextConfig

    parsed = griffe.load("ctx_langgraph.config", resolve_aliases=False)["ContextConfig"]
    meanings: dict[str, str] = {}
    for section in parsed.docstring.parse("google"):
        if section.kind.value == "parameters":
            for parameter in section.value:
                meanings[parameter.name] = " ".join(parameter.description.split())
    rows = []
    for field in dataclasses.fields(ContextConfig):
        if field.default is not dataclasses.MISSING:
            default = f"`{field.default!r}`"
        elif field.default_factory is not dataclasses.MISSING:
            default = f"`{field.default_factory()!r}`"
        else:
            default = "required"
        if field.name not in meanings:
            log.warning("ContextConfig.%s is not described in its docstring's Args", field.name)
        rows.append(
            f"| `{field.name}` | {_cell(_annotation(field.type))} | {default} | "
            f"{_cell(meanings.get(field.name, ''))} |"
        )
    link = _relative(_page_of(names, "ContextConfig"), "reference/config.md")
    return (
        "# ContextConfig\n\n"
        f"[`ContextConfig`]({link}) holds the knobs of the budget equation. Amounts are tokens "
        "(an `int`) or a fraction of the usable window (a `float` in (0, 1]), where usable = "
        "window - output reserve; times are seconds. Pass it as `config=` to "
        "`add_context_management`, `create_context_agent` or `ContextManagementMiddleware`.\n\n"
        "```text\n"
        "pinned rules + system prompt + tool schemas + memory + summary + uncovered tail + retrieved snippets\n"
        "  + output reserve + safety margin  <=  model context window\n"
        "```\n\n"
        "| field | type | default | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "`ContextConfig.resolve(window)` turns it into a `ResolvedBudget` in tokens for one "
        "window; the run's scope (thread, tenant, branch) comes from the run's `configurable`, "
        "not from here.\n"
    )


def _page_of(names: dict[str, list[Name]], name: str) -> str:
    return next(entry.page for entries in names.values() for entry in entries if entry.name == name)


def _typed_dict_rows(cls: type, page: str, names: dict[str, list[Name]]) -> tuple[str, list[type]]:
    import griffe

    parsed = griffe.load(cls.__module__, resolve_aliases=False)[cls.__qualname__]
    hints = typing.get_type_hints(cls)
    nested: list[type] = []
    rows = []
    for key in cls.__annotations__:
        member = parsed.members.get(key)
        doc = (
            _roles(" ".join(member.docstring.value.split())) if member and member.docstring else ""
        )
        if not doc:
            log.warning("%s.%s has no docstring", cls.__qualname__, key)
        declared = cls.__annotations__[key]
        annotation = getattr(declared, "__forward_arg__", None) or str(declared)
        annotation = annotation.replace("|", "\\|")
        for arg in (hints[key], *typing.get_args(hints[key])):
            if typing_extensions.is_typeddict(arg) and arg not in nested:
                nested.append(arg)
                target = _page_of(names, arg.__name__)
                annotation = annotation.replace(
                    arg.__name__, f"[{arg.__name__}]({_relative(target, page)})"
                )
        rows.append(f"| `{key}` | {annotation} | {_cell(doc)} |")
    return "| key | type | what it holds |\n|---|---|---|\n" + "\n".join(rows) + "\n", nested


def context_markdown(names: dict[str, list[Name]]) -> str:
    """The ``context`` channel's keys, from ``ContextReport``, and the reports it holds."""
    from ctx_langgraph.state import ContextReport

    page = "reference/context-channel.md"
    table, nested = _typed_dict_rows(ContextReport, page, names)
    parts = [
        "# The context channel\n\n"
        "The state's `context` channel holds, in plain JSON, the control state the next turn "
        "needs and `report`, what each step decided on its last pass: a few keys, bounded "
        "whatever the thread's length. Each node returns only the facts it changes; the "
        "reducer files each under its key. Read it from "
        "`graph.get_state(config).values[\"context\"]`, from a run's output, or in Studio's "
        "state view. Its type is "
        f"[`ContextReport`]({_relative(_page_of(names, 'ContextReport'), page)}); every key "
        "is optional (a key appears once a node has written it).\n\n",
        table,
    ]
    seen: set[type] = set()
    while nested:
        cls = nested.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        rows, inner = _typed_dict_rows(cls, page, names)
        nested.extend(inner)
        parts.append(f"\n## {cls.__name__}\n\n{_first_line(cls.__doc__)}\n\n{rows}")
    return "".join(parts)


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def cli_markdown() -> str:
    """Every command's ``--help``, exactly as the parser prints it."""
    import argparse

    from ctx_langgraph.cli import PROG, build_parser

    with _columns(100):
        parser = build_parser()
        parts = [
            "# Command line\n\n"
            f"`{PROG}` is installed with the package. This page is the parser's own help, "
            "command by command.\n\n"
            f"## {PROG}\n\n```text\n{parser.format_help()}```\n"
        ]
        [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for name, sub in commands.choices.items():
            parts.append(f"\n## {PROG} {name}\n\n```text\n{sub.format_help()}```\n")
    return "".join(parts)


def errors_markdown(names: dict[str, list[Name]]) -> str:
    """The error types as a tree, each with the first paragraph of its docstring."""
    from ctx_langgraph import errors

    page = "reference/errors.md"
    classes = [getattr(errors, name) for name in errors.__all__]

    def tree(parent: type, depth: int) -> Iterator[str]:
        for cls in classes:
            if cls.__bases__[0] is parent:
                link = _relative(_page_of(names, cls.__name__), page)
                others = [b.__name__ for b in cls.__bases__[1:]]
                also = f" (also a `{'`, `'.join(others)}`)" if others else ""
                yield f"{'    ' * depth}- [`{cls.__name__}`]({link}){also}: {_first_line(cls.__doc__)}"
                yield from tree(cls, depth + 1)

    root = errors.ContextManagementError
    lines = "\n".join(tree(root, 1))
    link = _relative(_page_of(names, root.__name__), page)
    return (
        "# Errors\n\n"
        "Every error the package raises on purpose is a subclass of "
        f"[`ContextManagementError`]({link}) (from `ctx_langgraph` or `ctx_langgraph.errors`), "
        "so one `except` catches them all; each message names the scope and the numbers. "
        "Some are also a built-in type (`ValueError`, `TimeoutError`), so code that catches "
        "those keeps working.\n\n"
        f"- [`ContextManagementError`]({link}): {_first_line(root.__doc__)}\n{lines}\n\n"
        "What the package does when one is raised on the per-turn path (retry, fall back, or "
        "raise) is in [When something fails](../concepts/failures.md).\n"
    )


def reference_index(names: dict[str, list[Name]]) -> str:
    rows = "\n".join(
        f"| [`{module}`]({_relative(module_page(module), 'reference/index.md')}) | "
        f"{_cell(_first_line(inspect.getdoc(importlib.import_module(module))))} |"
        for module in names
    )
    every = sorted(
        {(entry.name, entry.page) for entries in names.values() for entry in entries},
        key=lambda pair: pair[0].lower(),
    )
    index = ", ".join(
        f"[`{name}`]({_relative(page, 'reference/index.md')})" for name, page in every
    )
    return (
        "# Reference\n\n"
        "Generated from the code at every build: the docstrings, the dataclass fields, the "
        "parser.\n\n"
        "- [ContextConfig](config.md): every field, its type, default and unit.\n"
        "- [The context channel](context-channel.md): every key a node writes.\n"
        "- [Command line](cli.md): every `ctx-langgraph` command's help.\n"
        "- [Errors](errors.md): the error types.\n"
        "- [Export format](export-format.md): the thread export document.\n\n"
        "## Modules\n\n"
        "The public API is the `__all__` of these modules. `import ctx_langgraph` gives the "
        "entry points and the objects you pass them; the rest is imported from its module.\n\n"
        "| module | what it holds |\n|---|---|\n" + rows + "\n\n"
        "## Every public name\n\n" + index + "\n"
    )


def _generated(names: dict[str, list[Name]]) -> dict[str, str]:
    pages = {
        "reference/index.md": reference_index(names),
        "reference/config.md": config_markdown(names),
        "reference/context-channel.md": context_markdown(names),
        "reference/cli.md": cli_markdown(),
        "reference/errors.md": errors_markdown(names),
    }
    exporters: dict[str, list[str]] = {}
    for module, entries in names.items():
        pages[module_page(module)] = module_markdown(module, entries)
        for entry in entries:
            exporters.setdefault(entry.page, []).append(module)
    for entries in names.values():
        for entry in entries:
            if entry.page.startswith(f"{API}/{entry.module}/"):
                pages[entry.page] = name_markdown(entry, exporters[entry.page])
    return pages


def _api_nav(names: dict[str, list[Name]]) -> list[Any]:
    nav: list[Any] = []
    for module, entries in names.items():
        own = [
            {entry.name: entry.page}
            for entry in entries
            if entry.page.startswith(f"{API}/{module}/")
        ]
        nav.append({module: [module_page(module), *own]})
    return nav


_STATE: dict[str, Any] = {}


def on_config(config: Any) -> Any:
    names = public_names()
    _STATE["names"] = names
    for section in config["nav"]:
        if isinstance(section, dict) and "Reference" in section:
            section["Reference"].append({"API": _api_nav(names)})
            break
    else:
        log.warning("mkdocs.yml's nav has no Reference section for the API pages")
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    pages = _generated(_STATE["names"])
    for path, content in pages.items():
        if files.get_file_from_path(path) is not None:
            log.warning("%s is generated: remove the file of that name from docs/", path)
            continue
        files.append(File.generated(config, path, content=content))
    return files


__all__ = ["PUBLIC_MODULES", "on_config", "on_files", "public_names"]
