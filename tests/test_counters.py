"""Token counters: exact offline tiktoken, the calibrated approximation, the count cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctx_langgraph.budget import ApproximateCounter, CountCache, TiktokenCounter, encoding_for_model

_OFFLINE = """
import socket, sys, tempfile, os
def refuse(*args, **kwargs):
    raise OSError("network disabled for this test")
socket.socket.connect = refuse
socket.create_connection = refuse
os.environ.pop("TIKTOKEN_CACHE_DIR", None)
from ctx_langgraph.budget import TiktokenCounter, ensure_offline_encodings
ensure_offline_encodings(sys.argv[1])
import tiktoken
assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
print(TiktokenCounter("gpt-4o").count_text("The quick brown fox jumps over the lazy dog."))
"""


def test_tiktoken_works_with_no_network(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE, str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "10"
    assert len(os.listdir(tmp_path / "cache")) == 2


def test_encoding_by_model_and_unknown_models():
    assert TiktokenCounter("gpt-4.1-mini").encoding_name == "o200k_base"
    assert TiktokenCounter("gpt-3.5-turbo").encoding_name == "cl100k_base"
    assert encoding_for_model("openai/gpt-5") == "o200k_base"
    with pytest.raises(ValueError, match="ApproximateCounter"):
        TiktokenCounter("claude-sonnet-4-5")
    assert TiktokenCounter("claude-sonnet-4-5", encoding="o200k_base").count_text("hi") == 1


def test_messages_blocks_images_tool_calls_and_schemas_are_counted():
    counter = TiktokenCounter("gpt-4o")
    text = HumanMessage("look at this")
    with_image = HumanMessage(
        content=[
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]
    )
    low = HumanMessage(
        content=[
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "x", "detail": "low"}},
        ]
    )
    assert counter.count_message(with_image) - counter.count_message(text) == 765
    assert counter.count_message(low) - counter.count_message(text) == 85
    thinking = AIMessage(
        content=[
            {"type": "thinking", "thinking": "plan the refund carefully"},
            {"type": "text", "text": "ok"},
        ]
    )
    assert counter.count_message(thinking) > counter.count_message(AIMessage("ok")) + 3
    call = AIMessage(
        "",
        tool_calls=[{"name": "refund", "args": {"order": "A-1042", "amount": 19.99}, "id": "c1"}],
    )
    assert (
        counter.count_message(call) >= counter.count_text('{"order":"A-1042","amount":19.99}') + 3
    )
    result = ToolMessage("refund issued", tool_call_id="c1")
    assert counter.count_message(result) > counter.count_text("refund issued")

    @tool
    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        return "ok"

    assert counter.count_tools([refund]) > counter.count_text("Refund an order.")
    request = [HumanMessage("hi"), call, result]
    assert counter.count_request(request, [refund]) == (
        sum(counter.count_message(m) for m in request) + counter.count_tools([refund]) + 3
    )


def test_approximate_counter_calibrates_within_bounds():
    counter = ApproximateCounter("gemini-2.5-pro")
    assert counter.family == "gemini" and counter.chars_per_token == 4.6
    first_id = counter.id
    counter.calibrate(
        measured_tokens=10_000, estimated_tokens=100, word_chars=460
    )  # absurd: bounded
    assert counter.chars_per_token == 2.0 and counter.id != first_id
    counter.calibrate(
        measured_tokens=50, estimated_tokens=100, word_chars=200
    )  # words: 200 chars / 50 tokens... moved halfway
    assert 2.0 < counter.chars_per_token <= 5.0
    before = counter.chars_per_token
    assert counter.calibrate(measured_tokens=0, estimated_tokens=10, word_chars=10) == before


def test_approximate_counter_is_close_to_tiktoken_on_prose_and_json():
    exact, approx = TiktokenCounter("gpt-4o"), ApproximateCounter("default")
    prose = "Caroline went to the support group yesterday and said it was really inspiring. " * 20
    data = json.dumps(
        [{"order": f"ORD-{k:05d}", "amount": k * 3.5, "sku": f"SKU-{k:04d}"} for k in range(40)]
    )
    for text in (prose, data):
        assert abs(approx.count_text(text) - exact.count_text(text)) / exact.count_text(text) < 0.25


def test_count_cache_keys_on_counter_message_and_revision():
    cache = CountCache(max_entries=2)
    counter = TiktokenCounter("gpt-4o")
    message = HumanMessage("hello there", id="m1")
    first = cache.count(counter, message)
    assert cache.count(counter, message) == first and cache.hits == 1
    edited = HumanMessage("hello there, edited", id="m1")
    assert cache.count(counter, edited) > first and cache.misses == 2
    cache.count(counter, HumanMessage("x", id="m2"))
    cache.count(counter, HumanMessage("y", id="m3"))
    assert len(cache._counts) == 2  # bounded
