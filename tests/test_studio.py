"""``langgraph dev`` serves the graphs of langgraph.json offline, with our ``context`` channel.

Starts the in-memory server (the one LangGraph Studio talks to) as a subprocess, without API keys
or network, and drives it over its HTTP API as Studio does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctx_langgraph import SQLiteHistoryStore
from ctx_langgraph.state import unpack

pytest.importorskip(
    "langgraph_api", reason="langgraph dev needs the studio extra: pip install -e '.[studio]'"
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "langgraph.json"
GRAPHS = json.loads(CONFIG.read_text())["graphs"]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
STARTUP_TIMEOUT_S = 90.0
# loopback only: a proxy from the environment must not see these requests
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Studio:
    """The HTTP API of a running ``langgraph dev``."""

    url: str
    log: Path

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with OPENER.open(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            pytest.fail(
                f"{method} {path} -> {exc.code}: {exc.read().decode(errors='replace')}\n"
                f"server log:\n{self.log.read_text()}"
            )

    def run(
        self,
        thread_id: str,
        assistant_id: str,
        text: str | None,
        config: dict[str, Any] | None = None,
        input: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One turn, as Studio's chat sends it (or ``input`` as Studio's input form sends it);
        the thread's values after the run."""
        body: dict[str, Any] = {
            "assistant_id": assistant_id,
            "input": input or {"messages": [{"role": "user", "content": text}]},
        }
        if config is not None:
            body["config"] = config
        values = self.call("POST", f"/threads/{thread_id}/runs/wait", body)
        assert "__error__" not in values, f"{values['__error__']}\n{self.log.read_text()}"
        return values


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_ok(studio: Studio, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(
                f"langgraph dev exited with {server.returncode}; its log:\n{studio.log.read_text()}"
            )
        try:
            with OPENER.open(studio.url + "/ok", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    pytest.fail(
        f"langgraph dev did not answer /ok within {STARTUP_TIMEOUT_S:.0f} s; its log:\n"
        f"{studio.log.read_text()}"
    )


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    # langgraph dev resolves langgraph.json's graph paths against its working directory and
    # writes its own persistence (.langgraph_api/) there: run it in a scratch directory that
    # sees the repo's graphs, so a developer's Studio threads in the repo are never touched.
    workdir = tmp_path_factory.mktemp("studio")
    (workdir / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        CTX_HISTORY_DB=str(workdir / "history.sqlite"),
        CTX_MEMORY_DB=str(workdir / "memory.sqlite"),
        CTX_EXPLORER_DB=str(workdir / "explorer.sqlite"),
    )
    port = free_port()
    studio = Studio(f"http://127.0.0.1:{port}", workdir / "server.log")
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    with studio.log.open("wb") as log:
        server = subprocess.Popen(
            [*command, "--config", str(CONFIG)],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped with everything it spawned
        )
        try:
            wait_until_ok(studio, server)
            yield studio
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


@pytest.fixture(scope="module")
def assistants(studio: Studio) -> dict[str, str]:
    """graph id -> assistant id of the assistants the server made from langgraph.json."""
    found = studio.call("POST", "/assistants/search", {"limit": 100})
    return {assistant["graph_id"]: assistant["assistant_id"] for assistant in found}


def test_studio_serves_every_graph_of_langgraph_json(assistants):
    assert set(assistants) == set(GRAPHS)


def test_context_agent_runs_in_studio_with_the_context_channel(studio, assistants):
    thread_id = studio.call("POST", "/threads", {})["thread_id"]
    studio.run(thread_id, assistants["context_agent"], "Where is ORD-1042?")

    values = studio.call("GET", f"/threads/{thread_id}/state")["values"]
    *_, tool, answer = values["messages"]
    assert tool["type"] == "tool" and tool["name"] == "get_order_status"
    assert answer["type"] == "ai" and "ORD-1042" in answer["content"]
    context = unpack(values["context"])
    budget = context["budget"]
    assert budget["decision"] == "proceed" and budget["method"] in {"baseline", "recount"}
    assert budget["generation"] == 0  # no summary yet
    assert 0 < budget["input_tokens"] < budget["trigger"] < budget["window"] == 16_000
    # the last reply's reported usage is the baseline of the next estimate
    baseline = context["baseline"]
    assert baseline["measured_input_tokens"] == answer["usage_metadata"]["input_tokens"]
    assert baseline["reply_message_id"] == answer["id"]
    assert context["memory"]["loaded"] == 0  # the memory is wired (nothing to remember yet)


def test_context_agent_remembers_a_user_across_threads_in_studio(studio, assistants):
    user = {"configurable": {"user_id": "studio-ann"}}
    first = studio.call("POST", "/threads", {})["thread_id"]
    studio.run(first, assistants["context_agent"], "Hi, I live in Lisbon.", config=user)
    second = studio.call("POST", "/threads", {})["thread_id"]
    studio.run(second, assistants["context_agent"], "Where is ORD-1042?", config=user)

    values = studio.call("GET", f"/threads/{second}/state")["values"]
    [memory] = [m for m in values["messages"] if m["id"] == "ctx-memory"]
    assert "The user lives in Lisbon." in memory["content"]
    assert values["context"]["report"]["memory"]["loaded"] == 1


def test_compaction_playground_compacts_in_studio(studio, assistants):
    thread_id = studio.call("POST", "/threads", {})["thread_id"]
    turns = ["My locker code is 4471"] + [f"Where is ORD-{n}?" for n in range(2041, 2048)]
    for text in turns:
        values = studio.run(thread_id, assistants["compaction_playground"], text)
        if (values["context"].get("summary", {}).get("generation") or 0) >= 1:
            break
    else:
        pytest.fail(f"no compaction within {len(turns)} turns: {values['context']['budget']}")

    values = studio.call("GET", f"/threads/{thread_id}/state")["values"]
    context = unpack(values["context"])
    assert context["active_generation"] >= 1
    assert context["budget"]["generation"] == context["active_generation"]  # re-estimated after
    assert context["compaction"]["status"] == "committed"
    assert values["messages"][0]["id"] == "ctx-summary"


def test_a_compaction_asked_for_from_studio(studio, assistants):
    """Studio's input form: ``{"context": {"compact": {"instructions": ...}}}`` compacts the
    thread now, below the trigger, with the instructions recorded; no model call follows."""
    thread_id = studio.call("POST", "/threads", {})["thread_id"]
    playground = assistants["compaction_playground"]
    for text in ("My locker code is 4471", "Where is ORD-2041?", "Where is ORD-2042?"):
        values = studio.run(thread_id, playground, text)
    assert not values["context"].get("summary", {}).get("generation")  # below the trigger so far
    before = len(values["messages"])

    focus = "keep the locker code"
    values = studio.run(
        thread_id, playground, None, input={"context": {"compact": {"instructions": focus}}}
    )
    context = unpack(values["context"])
    assert context["compaction"]["status"] == "committed"
    assert context["compaction"]["requested"] == {"instructions": focus, "requested_by": "user"}
    assert context["compact"] is None and context["budget"]["decision"] == "done"
    assert values["messages"][0]["id"] == "ctx-summary"
    assert values["messages"][-1]["type"] == "ai" and len(values["messages"]) < before

    with SQLiteHistoryStore.from_path(studio.log.parent / "history.sqlite") as store:
        versions = [v for v in store.list_versions(thread_id) if v.status == "active"]
    assert [(v.metadata["requested_by"], v.metadata["instructions"]) for v in versions] == [
        ("user", focus)
    ]
