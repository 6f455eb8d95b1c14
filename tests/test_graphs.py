"""The Studio graphs under graphs/: they load, answer offline, and keep their wiring."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).parent / "snapshots"
GRAPHS = json.loads((ROOT / "langgraph.json").read_text())["graphs"]


def load(name: str):
    path, attr = GRAPHS[name].split(":")
    spec = importlib.util.spec_from_file_location(f"graphs_{name}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, attr)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_wiring_matches_snapshot(name, tmp_path, monkeypatch):
    monkeypatch.setenv("CTX_EXPLORER_DB", str(tmp_path / "explorer.sqlite"))
    _, graph = load(name)
    mermaid = graph.get_graph().draw_mermaid()
    snapshot = SNAPSHOTS / f"{name}.mmd"
    assert mermaid == snapshot.read_text(), (
        f"wiring of {name} changed; update {snapshot} if intended"
    )


def test_history_explorer_answers_with_exact_evidence(tmp_path, monkeypatch):
    monkeypatch.setenv("CTX_EXPLORER_DB", str(tmp_path / "explorer.sqlite"))
    module, graph = load("history_explorer")
    qa = module.CONVERSATION.questions[0]
    evidence = next(m for m in module.CONVERSATION.messages if m.id == qa.evidence[0])
    result = graph.invoke({"messages": [HumanMessage(qa.query)]})
    answer = result["messages"][-1].content
    assert evidence.content in answer and "seq " in answer
    assert (
        "No message"
        in graph.invoke({"messages": [HumanMessage("zeppelin")]})["messages"][-1].content
    )
    assert (
        "Not a searchable"
        in graph.invoke({"messages": [HumanMessage("?!")]})["messages"][-1].content
    )
