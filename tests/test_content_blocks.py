"""Every content block keeps its reference in the history's text: image and file URLs, file ids,
names and mime types survive into what the summarizer and ``history_lookup`` see; a base64
payload is shown by its size and digest, never pasted. Odd blocks never raise and keep what
identifies them."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    LLMSummarizer,
    add_context_management,
    make_history_lookup_tool,
)
from ctx_langgraph.compaction import SummaryRequest
from ctx_langgraph.core.blocks import block_reference
from ctx_langgraph.history import text_projection
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 48  # 12,296 bytes
PNG_B64 = base64.b64encode(PNG).decode()
PNG_DIGEST = hashlib.sha256(PNG).hexdigest()[:8]
PNG_SHOWN = f"base64 {len(PNG):,} bytes sha256:{PNG_DIGEST}"
PDF = b"%PDF-1.7 " + b"x" * 3000
PDF_B64 = base64.b64encode(PDF).decode()
PDF_SHOWN = f"base64 {len(PDF):,} bytes sha256:{hashlib.sha256(PDF).hexdigest()[:8]}"
CAT = "https://cdn.example.com/pets/cat-4711.png?sig=abc123"


def text_of(content: list[Any]) -> str:
    message = HumanMessage([])
    message.content.extend(content)  # (as a client may: blocks the message model would refuse)
    return text_projection(message)


# one case per block shape the integrations send: (block, what its text must hold)
CASES: dict[str, tuple[Any, list[str]]] = {
    "openai image_url": (
        {"type": "image_url", "image_url": {"url": CAT, "detail": "high"}},
        ["[image_url", CAT],
    ),
    "openai image_url as a string": ({"type": "image_url", "image_url": CAT}, [CAT]),
    "openai image_url data URL": (
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        [f"[image_url image/png {PNG_SHOWN}]"],
    ),
    "openai input_image (responses)": (
        {"type": "input_image", "image_url": CAT, "detail": "auto"},
        ["[input_image", CAT],
    ),
    "openai input_image by file id": (
        {"type": "input_image", "file_id": "file-IMG42"},
        ["[input_image", "file_id file-IMG42"],
    ),
    "openai file by id": (
        {"type": "file", "file": {"file_id": "file-abc123", "filename": "invoice.pdf"}},
        ["[file", "invoice.pdf", "file_id file-abc123"],
    ),
    "openai file data": (
        {
            "type": "file",
            "file": {"filename": "q3.pdf", "file_data": f"data:application/pdf;base64,{PDF_B64}"},
        },
        ["[file q3.pdf application/pdf", PDF_SHOWN],
    ),
    "openai input_audio": (
        {"type": "input_audio", "input_audio": {"data": PNG_B64, "format": "wav"}},
        ["[input_audio wav", PNG_SHOWN],
    ),
    "anthropic image base64": (
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        [f"[image image/png {PNG_SHOWN}]"],
    ),
    "anthropic image url": (
        {"type": "image", "source": {"type": "url", "url": CAT}},
        ["[image", CAT],
    ),
    "anthropic document by file id": (
        {
            "type": "document",
            "title": "Master services agreement",
            "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        },
        ["[document Master services agreement", "file_id file_011CNha8iCJcU1wXNR6q4V8w"],
    ),
    "anthropic document pdf": (
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
        },
        [f"[document application/pdf {PDF_SHOWN}]"],
    ),
    "anthropic plain-text document": (
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Clause 7: net 30."},
        },
        ["[document text/plain", "Clause 7: net 30."],
    ),
    "langchain image url": (
        {"type": "image", "url": CAT, "mime_type": "image/png"},
        ["[image image/png", CAT],
    ),
    "langchain image base64": (
        {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
        [f"[image image/png {PNG_SHOWN}]"],
    ),
    "langchain image file id": (
        {"type": "image", "file_id": "file-77", "id": "lc_block_1"},
        ["[image", "file_id file-77", "id lc_block_1"],
    ),
    "langchain file url": (
        {
            "type": "file",
            "url": "https://files.example.com/contract.pdf",
            "mime_type": "application/pdf",
            "extras": {"filename": "contract.pdf"},
        },
        ["[file", "contract.pdf", "application/pdf", "https://files.example.com/contract.pdf"],
    ),
    "langchain audio": (
        {"type": "audio", "base64": PNG_B64, "mime_type": "audio/wav"},
        [f"[audio audio/wav {PNG_SHOWN}]"],
    ),
    "langchain video url": (
        {"type": "video", "url": "https://v.example.com/demo.mp4", "mime_type": "video/mp4"},
        ["[video video/mp4 https://v.example.com/demo.mp4]"],
    ),
    "langchain v0 image by url": (
        {"type": "image", "source_type": "url", "url": CAT},
        ["[image", CAT],
    ),
    "langchain v0 file by id": (
        {"type": "file", "source_type": "id", "id": "file-v0-9"},
        ["[file", "id file-v0-9"],
    ),
    "langchain v0 image base64": (
        {"type": "image", "source_type": "base64", "data": PNG_B64, "mime_type": "image/png"},
        [f"[image image/png {PNG_SHOWN}]"],
    ),
    "gemini media by uri": (
        {"type": "media", "file_uri": "gs://bucket/scan-12.pdf", "mime_type": "application/pdf"},
        ["[media application/pdf gs://bucket/scan-12.pdf]"],
    ),
    "bedrock image bytes": (
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        [f"[image png {len(PNG):,} bytes sha256:{PNG_DIGEST}]"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_block_kind_keeps_its_reference_in_the_text(case: str) -> None:
    block, expected = CASES[case]
    text = text_of([{"type": "text", "text": "Look at this:"}, block])
    assert text.startswith("Look at this:\n")
    for part in expected:
        assert part in text, (case, text)
    # a payload is never pasted: the text stays short whatever the file's size
    assert PNG_B64[:40] not in text and PDF_B64[:40] not in text
    assert len(text) < 400


def test_a_tool_result_keeps_the_references_of_the_blocks_it_returns() -> None:
    tool = ToolMessage(
        [{"type": "text", "text": "screenshot taken"}, {"type": "image", "url": CAT}],
        tool_call_id="c1",
        name="screenshot",
    )
    assert CAT in text_projection(tool)
    nested = HumanMessage(
        [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": CAT}},
                    {"type": "text", "text": "done"},
                ],
            }
        ]
    )
    assert CAT in text_projection(nested) and "done" in text_projection(nested)


HOSTILE: list[Any] = [
    {"type": "image"},
    {"type": "image_url"},
    {"type": "image_url", "image_url": None},
    {"type": "image_url", "image_url": {"url": 12}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64"}},  # no comma
    {"type": "image_url", "image_url": {"url": "data:;base64,!!!not base64!!!"}},
    {"type": "image", "source": "not a dict"},
    {"type": "image", "source": {"type": "base64", "data": None}},
    {"type": "image", "source": {"type": "base64", "data": "%%%%"}},
    {"type": "file", "file": ["odd", {"file_id": "file-in-a-list"}]},
    {"type": 7, "url": CAT},
    {"no_type": True, "url": CAT},
    {"type": "mystery_widget", "widget_id": "w-1", "name": "gauge", "payload": {"x": 1}},
    {"type": "image", "base64": "A" * 7_000_000, "mime_type": "image/jpeg"},  # ~5 MB
    {"type": "image", "url": "https://x.example.com/" + "a" * 20_000},
    {"type": "image", "url": CAT, "nested": {"deeper": {"deepest": {"url": CAT + "&d=4"}}}},
    b"\x00\x01raw bytes",
    12345,
    None,
    ["a list", "of strings"],
    {"type": "text", "text": None},
    {"type": "image", "mime_type": {"not": "a string"}, "url": CAT},
]


@pytest.mark.parametrize("block", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_an_odd_block_never_raises_and_keeps_what_identifies_it(block: Any) -> None:
    text = text_of(["before", block, "after"])
    assert text.startswith("before\n") and text.endswith("\nafter")
    assert len(text) < 3_000  # a huge payload or URL is shown by its size and digest
    shown = block_reference(block)
    assert isinstance(shown, str)
    if isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"] != "text":
        assert f"[{block['type']}" in text  # what kind of block was there stays said
    if isinstance(block, dict) and block.get("url") == CAT:
        assert CAT in text


def test_the_odd_blocks_keep_their_identifiers() -> None:
    widget = {"type": "mystery_widget", "widget_id": "w-1", "name": "gauge", "payload": {"x": 1}}
    assert block_reference(widget) == "[mystery_widget gauge widget_id w-1]"
    huge = {"type": "image", "base64": "A" * 7_000_000, "mime_type": "image/jpeg"}
    raw = base64.b64decode("A" * 7_000_000)
    digest = hashlib.sha256(raw).hexdigest()[:8]
    assert block_reference(huge) == f"[image image/jpeg base64 {len(raw):,} bytes sha256:{digest}]"
    long_url = "https://x.example.com/" + "a" * 20_000
    shown = block_reference({"type": "image", "url": long_url})
    digest = hashlib.sha256(long_url.encode()).hexdigest()[:8]
    assert long_url[:200] in shown and f"20,022 chars sha256:{digest}" in shown
    raw_bytes = b"\x00\x01raw bytes"
    expected = f"[bytes 11 bytes sha256:{hashlib.sha256(raw_bytes).hexdigest()[:8]}]"
    assert block_reference(raw_bytes) == expected
    not_base64 = block_reference({"type": "image", "source": {"type": "base64", "data": "%%%%"}})
    assert "4 chars sha256:" in not_base64
    bedrock = block_reference(
        {"document": {"name": "brief", "source": {"s3Location": {"uri": "s3://b/k.pdf"}}}}
    )
    assert bedrock == "[document brief s3://b/k.pdf]"


# ------------------------------------------------------------------ through compaction and lookup

CONFIG = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    keep_recent_tokens=600,
    summary_max_tokens=300,
    tool_output_cap_tokens=None,
)
RECEIPT = "https://receipts.example.com/2024/rcpt-90210.jpg"


class Recording:
    """An LLM summarizer on a metered fake, keeping every prompt."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

        def reply(messages: list[BaseMessage]) -> AIMessage:
            self.prompts.append("\n".join(str(m.text) for m in messages))
            return scripted_summary_reply(messages)

        self.inner = LLMSummarizer(MeteringChatModel(replies=[reply]))
        self.id, self.window_tokens = self.inner.id, None

    def summarize(self, request: SummaryRequest) -> str:
        return self.inner.summarize(request)

    async def asummarize(self, request: SummaryRequest) -> str:
        return await self.inner.asummarize(request)


def first_turn() -> HumanMessage:
    return HumanMessage(
        [
            {"type": "text", "text": "Here is my receipt and the scanned form."},
            {"type": "image_url", "image_url": {"url": RECEIPT}},
            {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
            {"type": "file", "file": {"file_id": "file-FORM-311", "filename": "form311.pdf"}},
        ],
        id="receipt",
    )


def filler(turn: int) -> HumanMessage:
    text = f"Turn {turn}: the quarterly ledger review covers accruals, deferrals and audits. " * 6
    return HumanMessage(text, id=f"h{turn}")


def graph_of(store: Any, summarizer: Recording) -> Any:
    model = MeteringChatModel(replies=[lambda m: AIMessage("Noted: " + str(m[-1].text)[:400])])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_edge(START, "agent")
    add_context_management(
        builder, model_node="agent", store=store, config=CONFIG, summarizer=summarizer, model=model
    )
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_after_compaction_the_summarizer_and_the_lookup_give_the_references_back(
    backend: Any, mode: str
) -> None:
    store = backend.make()
    store.setup()
    summarizer = Recording()
    graph = graph_of(store, summarizer)
    thread = f"blocks-{mode}"
    config = {"configurable": {"thread_id": thread}}
    tool = make_history_lookup_tool(store)
    turns = [first_turn(), *(filler(turn) for turn in range(2, 12))]

    async def drive() -> list[dict[str, Any]]:
        for message in turns:
            if mode == "sync":
                graph.invoke({"messages": [message]}, config)
            else:
                await graph.ainvoke({"messages": [message]}, config)
        receipt = store.get_event(thread, "receipt")
        assert receipt is not None
        calls = [
            {"min_seq": receipt.seq, "max_seq": receipt.seq},
            {"handle": f"history:{receipt.event_id}"},
            {"query": "receipt scanned form"},
            {"query": "rcpt-90210"},
        ]
        pages = []
        for args in calls:
            if mode == "sync":
                text = tool.invoke(args, config=config)
            else:
                text = await tool.ainvoke(args, config=config)
            pages.append(json.loads(text))
        return pages

    pages = asyncio.run(drive())
    active = store.get_active(thread)
    assert active is not None and active.covered_through_seq >= 1, "never compacted"
    state = graph.get_state(config).values
    assert all(m.id != "receipt" for m in state["messages"])  # it was summarized away
    # the summarizer saw the references, not the payload
    assert summarizer.prompts and RECEIPT in summarizer.prompts[0]
    assert "file-FORM-311" in summarizer.prompts[0] and PNG_SHOWN in summarizer.prompts[0]
    assert PNG_B64[:40] not in summarizer.prompts[0]
    # by seq, by handle and by words, the record gives the model the URL and ids back
    for page in pages:
        texts = [r["text"] for r in page["records"] if r["seq"] == 1 or "receipt" in r["text"]]
        assert any(RECEIPT in t and "file-FORM-311" in t and PNG_SHOWN in t for t in texts), page
