"""The documentation site, checked like code: ``mkdocs build --strict`` (the project's own
configuration and hooks) succeeds with no warning, offline; the site has its four parts and a
reference page for every public name; nothing it loads comes from the network; and a headless
Chromium opens the home page, searches, and renders a reference page, a how-to page and a
Mermaid diagram. The browser test writes its screenshots to ``.ctx-screenshots/``.

The shell commands of the README and the site are checked too: every ``ctx-langgraph`` command
parses with the real parser, every script and benchmark it names exists, and every flag given to
a benchmark is one its ``--help`` lists. (The Python examples run in ``tests/test_docs.py``.)
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import json
import os
import pkgutil
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import ctx_langgraph

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / ".ctx-screenshots"
PARTS = {
    "Get started": "get-started/install",
    "Concepts": "concepts",
    "How-to guides": "how-to",
    "Reference": "reference",
    "Benchmarks": "benchmarks",
}

BROWSER_SIZE = (1280, 900)
"""The window the ``browser`` fixture (tests/conftest.py) opens for this module."""


@functools.cache
def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_hooks"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site, built with the project's own configuration, and the build's output."""
    site = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return site, f"exit {result.returncode}\n{result.stdout}{result.stderr}"


def _check_the_site_builds_strict_with_no_warning(built: tuple[Path, str]) -> None:
    site, output = built
    assert output.startswith("exit 0\n"), output[-3000:]
    warnings = [line for line in output.splitlines() if "WARNING" in line or "ERROR" in line]
    assert warnings == []
    assert (site / "index.html").is_file() and (site / "search" / "search_index.json").is_file()


def _check_the_site_has_its_parts_in_order(built: tuple[Path, str]) -> None:
    site, _ = built
    home = (site / "index.html").read_text()
    tabs = re.findall(r'class="md-tabs__link[^"]*"[^>]*>\s*([^<]+?)\s*<', home)
    assert [tab for tab in tabs if tab in PARTS] == list(PARTS)
    for folder in PARTS.values():
        assert (site / folder / "index.html").is_file(), folder
    for page in ("design", "architecture", "reference/config", "reference/context-channel"):
        assert (site / page / "index.html").is_file(), page
    for page in ("reference/cli", "reference/errors", "reference/export-format"):
        assert (site / page / "index.html").is_file(), page


def _check_every_public_name_has_a_reference_page(built: tuple[Path, str]) -> None:
    site, _ = built
    hooks = _hooks()
    names = hooks.public_names()
    pages = {entry.page: entry for entries in names.values() for entry in entries}
    assert len(pages) > 250
    for page, entry in pages.items():
        html = (site / page.removesuffix(".md") / "index.html").read_text()
        owner = page.split("/")[-2]  # the first module exporting it documents it
        assert f'id="{owner}.{entry.name}"' in html, page
        assert "doc-contents" in html, page  # the docstring rendered
    for module in names:
        assert (site / hooks.API / module / "index.html").is_file(), module
    # every name a module exports is on its page's table, and the index links every page
    index = (site / "reference" / "index.html").read_text()
    for page in pages:
        assert page.split("/", 1)[1].removesuffix(".md") + "/" in index, page


def test_the_reference_covers_every_public_module():
    hooks = _hooks()
    top = {
        f"ctx_langgraph.{info.name}"
        for info in pkgutil.iter_modules(ctx_langgraph.__path__)
        if not info.name.startswith("_") and info.name not in hooks.INTERNAL_PACKAGES
    }
    assert top <= set(hooks.PUBLIC_MODULES)
    # the generated pages name what the code has: ContextConfig's fields, the CLI's commands
    from dataclasses import fields

    from ctx_langgraph.config import ContextConfig

    config = hooks.config_markdown(hooks.public_names())
    for field in fields(ContextConfig):
        assert f"| `{field.name}` |" in config
    cli = hooks.cli_markdown()
    for command in ("demo", "eval", "retention", "export", "compact", "inspect"):
        assert f"## ctx-langgraph {command}\n" in cli


def _check_nothing_on_the_site_comes_from_the_network(built: tuple[Path, str]) -> None:
    site, _ = built
    remote = re.compile(r"""<(?:script|link|img|iframe)[^>]+(?:src|href)=["'](?:https?:)?//""")
    offenders = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if remote.search(page.read_text(errors="replace"))
    ]
    assert offenders == []
    assert (site / "assets" / "javascripts" / "mermaid.min.js").stat().st_size > 1_000_000


# ------------------------------------------------------------------------------ browser


@contextlib.contextmanager
def _served(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _wait(driver: Any, script: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {script}")


def _resources(driver: Any) -> list[str]:
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href])"
    )


def test_the_built_site(built, browser):
    """One test reads the built site, so the build (about 20 s) happens in one worker while the
    others go on: strict and warning-free, its parts, the reference, nothing remote, and then
    what a browser shows."""
    _check_the_site_builds_strict_with_no_warning(built)
    _check_the_site_has_its_parts_in_order(built)
    _check_every_public_name_has_a_reference_page(built)
    _check_nothing_on_the_site_comes_from_the_network(built)
    _check_a_browser_opens_the_home_page_searches_and_reads_the_reference(built, browser)


def _check_a_browser_opens_the_home_page_searches_and_reads_the_reference(
    built: tuple[Path, str], browser: Any
) -> None:
    site, _ = built
    SCREENSHOTS.mkdir(exist_ok=True)
    with _served(site) as base:
        seen: list[str] = []
        browser.get(base)
        assert "ctx-langgraph" in browser.title
        header = browser.find_element("css selector", "article h1").text
        assert "ctx-langgraph" in header
        tabs = [tab.text for tab in browser.find_elements("css selector", ".md-tabs__link")]
        assert [tab for tab in tabs if tab in PARTS] == list(PARTS)
        browser.save_screenshot(str(SCREENSHOTS / "site-home.png"))

        # search runs in the browser (a web worker over search_index.json)
        box = browser.find_element("css selector", "input.md-search__input")
        box.click()
        box.send_keys("coverage cursor")
        _wait(browser, "return document.querySelectorAll('.md-search-result__item').length > 0")
        links = browser.execute_script(
            "return [...document.querySelectorAll('.md-search-result__link')].map(a => a.href)"
        )
        assert any("concepts/coverage-cursor/" in link for link in links), links
        seen += _resources(browser)

        # a reference page, rendered from the docstrings
        browser.get(base + "reference/api/ctx_langgraph.history/HistoryStore/")
        title = browser.find_element("css selector", "article h1").text
        assert "HistoryStore" in title
        members = browser.find_elements("css selector", "article .doc-heading")
        assert len(members) > 10  # its methods
        assert browser.find_elements("css selector", "article .doc-signature")
        seen += _resources(browser)

        # a how-to page
        browser.get(base + "how-to/postgres/")
        assert "PostgreSQL" in browser.find_element("css selector", "article h1").text
        assert browser.find_elements("css selector", "article pre code")
        browser.save_screenshot(str(SCREENSHOTS / "site-howto.png"))
        seen += _resources(browser)

        # Mermaid (vendored) draws every diagram: Material swaps each source block for a
        # <div class="mermaid"> holding the drawing in a closed shadow root
        for page, diagrams in _mermaid_pages().items():
            browser.get(base + page)
            drawn = _wait(
                browser,
                "const drawn = [...document.querySelectorAll('div.mermaid')];"
                "return drawn.every(d => d.getBoundingClientRect().height > 50) && drawn.length;",
            )
            assert drawn == diagrams, page
            seen += _resources(browser)
    remote = sorted({url for url in seen if not url.startswith(base)})
    assert remote == []


def _mermaid_pages() -> dict[str, int]:
    """Each page with diagrams (its URL under the site) and how many it has."""
    pages = {}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        count = len(re.findall(r"^[ \t]*```mermaid\n", path.read_text(), flags=re.M))
        if count:
            url = path.relative_to(ROOT / "docs").with_suffix("").as_posix()
            pages[url.removesuffix("index").rstrip("/") + "/"] = count
    return pages


def test_the_site_has_diagrams_and_its_json_examples_parse():
    assert sum(_mermaid_pages().values()) >= 3
    blocks = [
        block
        for page in PAGES
        for block in re.findall(r"^[ \t]*```json\n(.*?)^[ \t]*```", page.read_text(), re.S | re.M)
    ]
    for block in blocks:
        json.loads(block)


# ------------------------------------------------------------------------- shell blocks

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _commands() -> list[tuple[str, str]]:
    commands = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"^[ \t]*```(?:bash|shell|sh)\n(.*?)^[ \t]*```", text, re.S | re.M):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                command = line.split(" #", 1)[0].strip()
                if command and not command.startswith("#"):
                    commands.append((page.relative_to(ROOT).as_posix(), command))
    return commands


COMMANDS = _commands()


@functools.cache
def _benchmark_flags(script: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _words(command: str) -> list[str]:
    # one command of a `&&` chain or an env-prefixed command: the words of each part
    words = shlex.split(command.replace("$(", "").replace(")", ""), posix=True)
    return [word for word in words if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", word)]


def test_the_pages_have_shell_commands():
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[:60]}" for p, c in COMMANDS])
def test_each_shell_command_names_real_commands_scripts_and_flags(page, command):
    from ctx_langgraph.cli import build_parser

    for part in re.split(r"\s*(?:&&|\|\||;)\s*", command):
        words = _words(part)
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program == "ctx-langgraph":
            try:  # an unknown command or flag raises UsageError
                build_parser().parse_args(words[1:])
            except SystemExit as done:  # --help
                assert done.code == 0 and "--help" in words, command
        elif program == "bash" and len(words) > 1 and words[1].startswith("scripts/"):
            assert (ROOT / words[1]).is_file(), words[1]
        elif program in ("python", "python3") and len(words) > 1 and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), words[1]
            if words[1].startswith("benchmarks/"):
                listed = _benchmark_flags(words[1])
                for flag in (w.split("=", 1)[0] for w in words[2:] if w.startswith("--")):
                    assert flag in listed, f"{words[1]} has no {flag}"


def test_the_readme_links_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local and [t for t in local if not (ROOT / t).exists()] == []


def test_the_docs_and_notebooks_import_only_public_modules():
    """What a reader copies imports from a module the reference documents, never from the
    internal machinery (``core``, ``storage``, ``view``, a ``_private`` module)."""
    sources = [
        *PAGES,
        *sorted((ROOT / "notebooks").glob("*.ipynb")),
        *(ROOT / "graphs").glob("*.py"),
    ]
    imported = {
        (path.relative_to(ROOT).as_posix(), module)
        for path in sources
        for module in re.findall(
            r"(?:from|import) (ctx_langgraph(?:\.\w+)*)", path.read_text(encoding="utf-8")
        )
    }
    public = set(_hooks().PUBLIC_MODULES)
    assert len(imported) > 20
    assert sorted(pair for pair in imported if pair[1] not in public) == []


# ------------------------------------------------------------------- how it is installed here

INSTALL_PAGE = ROOT / "docs" / "get-started" / "install.md"


def test_no_page_installs_the_package_by_a_name_no_index_has():
    """ctx-langgraph is installed from a clone (or a wheel or git URL built from it), never by its
    bare name: ``pip install "ctx-langgraph[x]"`` would find nothing. One page says how an extra
    is added here, and every other page that names an extra links to it."""
    bare = re.compile(r"""pip install ["']?ctx-langgraph\[[\w,-]*\](?!\s*@)""")  # no URL after it
    for page in PAGES:
        text = page.read_text()
        assert not bare.search(text), f"{page.relative_to(ROOT)}: {bare.search(text)}"
    install = INSTALL_PAGE.read_text()
    assert "## Extras" in install and re.search(r"pip install -e ['\"]\.\[studio\]['\"]", install)
    for page in PAGES:
        if page in (INSTALL_PAGE, ROOT / "docs" / "design.md"):
            continue
        text = page.read_text()
        if re.search(r"`\w+` extra\b|extras?\b.*`\w+`", text) and "pip install" in text:
            assert re.search(r"\(\.?\.?/?(?:[\w-]+/)*install\.md#extras\)", text), (
                f"{page.relative_to(ROOT)} names an extra to install but does not link to "
                "install.md#extras"
            )


def _bootstrapped_extras(script: str) -> set[str]:
    """The extras a script of scripts/ installs into .venv (``bootstrap [EXTRAS]``), with the
    extras those extras include (pyproject's ``ctx-langgraph[...]`` entries)."""
    import tomllib

    text = (ROOT / script).read_text()
    calls = re.findall(r"^[ \t]*bootstrap(?:[ \t]+([\w,-]+))?[ \t]*$", text, re.M)
    assert calls, f"{script} does not bootstrap .venv"
    default = re.search(
        r'local extras="\$\{1:-([\w,-]+)\}"', (ROOT / "scripts/_bootstrap.sh").read_text()
    )
    assert default
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    wanted = [e for call in calls for e in (call or default.group(1)).split(",")]
    extras: set[str] = set()
    while wanted:
        extra = wanted.pop()
        if extra in extras:
            continue
        extras.add(extra)
        for requirement in optional[extra]:
            included = re.fullmatch(r"ctx-langgraph\[([\w,-]+)\]", requirement)
            if included:
                wanted += included.group(1).split(",")
    return extras


TOOL_EXTRAS = {"langgraph": "studio", "jupyter": "notebooks", "mkdocs": "docs", "pytest": "dev"}
"""The extra that installs each program a page runs from .venv/bin."""


def test_a_program_a_page_runs_from_the_venv_is_installed_by_the_scripts_it_names():
    """`.venv/bin/langgraph dev  # after scripts/demo.sh` must work after scripts/demo.sh: each
    script a command's comment names installs the extra that brings the program."""
    checked = 0
    for page in PAGES:
        for line in page.read_text().splitlines():
            program = re.search(r"\.venv/bin/([\w-]+)(?:\s+-m\s+(\w+))?", line)
            scripts = (
                re.findall(r"scripts/[\w-]+\.sh", line.split(" #", 1)[-1]) if " #" in line else []
            )
            if not program or not scripts:
                continue
            tool = program.group(2) or program.group(1)
            if tool not in TOOL_EXTRAS:
                continue
            for script in scripts:
                checked += 1
                assert TOOL_EXTRAS[tool] in _bootstrapped_extras(script), (
                    f"{page.relative_to(ROOT)}: {line.strip()!r}, but {script} does not install "
                    f"the {TOOL_EXTRAS[tool]!r} extra"
                )
    assert checked >= 2


def test_the_studio_page_starts_studio_with_a_script_that_installs_it():
    page = (ROOT / "docs" / "get-started" / "studio.md").read_text()
    run = page.split("## Run it", 1)[1].split("\n## ", 1)[0]
    [first, *_] = re.findall(r"```bash\n(.*?)```", run, flags=re.S)
    command = first.splitlines()[0].split(" #", 1)[0].split()
    assert command[:2] == ["bash", "scripts/studio.sh"], command
    assert "studio" in _bootstrapped_extras("scripts/studio.sh")
    script = (ROOT / "scripts" / "studio.sh").read_text()
    assert re.search(r'exec "\$VENV/bin/langgraph" dev', script)


def test_the_drop_in_page_reads_the_context_channel_where_it_is():
    """``invoke()`` on a MessagesState graph returns its own keys (``messages``); the page shows
    the channel in the checkpointed state (its Python blocks run in tests/test_docs.py)."""
    page = (ROOT / "docs" / "get-started" / "drop-in.md").read_text()
    blocks = "\n".join(re.findall(r"```python\n(.*?)```", page, flags=re.S))
    assert re.search(r"\.get_state\(run\)\.values\[\"context\"\]", blocks)
    assert re.search(r'assert "context" not in state', blocks)


def test_the_reference_shows_a_store_flow_method_and_its_async_twin_as_methods():
    """``@flow_method def append(...) -> Flow[R]`` is documented as returning ``R``, and
    ``aappend = async_twin(append)`` as an async method with ``append``'s parameters."""
    griffe = pytest.importorskip("griffe")
    extensions = griffe.load_extensions(f"{ROOT}/scripts/docs_griffe.py:SphinxRoles")
    package = griffe.load("ctx_langgraph", extensions=extensions, search_paths=[str(ROOT)])
    store = package["history.base.HistoryStore"]
    append, aappend = store.members["append"], store.members["aappend"]
    assert str(append.returns) == "list[AppendResult]"
    assert isinstance(aappend, griffe.Function) and "async" in aappend.labels
    assert [p.name for p in aappend.parameters] == [p.name for p in append.parameters]
    assert str(aappend.returns) == "list[AppendResult]"
    assert "Async twin of" in aappend.docstring.value
