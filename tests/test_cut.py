"""Cut-point selection: property tests over generated agent histories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctx_langgraph.compaction import choose_cut, first_coverable, pairing_problems, tool_groups


@st.composite
def histories(draw):
    messages = []
    if draw(st.booleans()):
        messages.append(SystemMessage("rules", id="sys"))
    if draw(st.booleans()):
        messages.append(HumanMessage("summary", id="sum", additional_kwargs={"ctx_summary": True}))
    tokens = [5] * len(messages)
    call = 0
    for turn in range(draw(st.integers(1, 8))):
        messages.append(HumanMessage(f"q{turn}", id=f"h{turn}"))
        tokens.append(draw(st.sampled_from([5, 40, 400, 5_000])))  # huge single turns happen
        for step in range(draw(st.integers(0, 3))):
            width = draw(st.integers(1, 3))  # parallel tool calls
            ids = [f"c{call + k}" for k in range(width)]
            call += width
            content = [{"type": "thinking", "thinking": "plan"}] if draw(st.booleans()) else ""
            messages.append(
                AIMessage(
                    content,
                    id=f"a{turn}-{step}",
                    tool_calls=[{"name": "f", "args": {}, "id": i} for i in ids],
                )
            )
            tokens.append(draw(st.integers(1, 300)))
            for i in ids:
                messages.append(ToolMessage("r", tool_call_id=i, id=f"t-{i}"))
                tokens.append(draw(st.sampled_from([3, 50, 2_000])))
        if draw(st.booleans()):
            messages.append(AIMessage(f"answer {turn}", id=f"ans{turn}"))
            tokens.append(draw(st.integers(1, 200)))
    return messages, tokens


@settings(max_examples=1_000, deadline=None)
@given(history=histories(), keep=st.integers(0, 6_000))
def test_cut_never_breaks_the_tool_protocol(history, keep):
    messages, tokens = history
    cut = choose_cut(messages, tokens, keep_recent_tokens=keep)
    assert pairing_problems(messages) == []
    if cut is None:  # only when the history is one atomic group (nothing before the newest)
        groups = tool_groups(messages, first_coverable(messages))
        assert not [b for b, _ in groups[1:] if not isinstance(messages[b], ToolMessage)]
        return
    covered, tail = messages[cut.start : cut.index], messages[cut.index :]
    assert covered and tail and tail[-1] is messages[-1]
    assert not isinstance(tail[0], ToolMessage)
    # what the model sees after compaction: system + summary + tail, all pairs intact
    assert pairing_problems([*messages[: cut.start], *tail]) == []
    assert pairing_problems(covered) == []  # the covered span is self-contained too
    assert cut.tail_tokens + cut.covered_tokens == sum(tokens[cut.start :])
    if cut.kind != "last_group":
        assert cut.tail_tokens <= keep
    if cut.kind == "user_turn":
        assert isinstance(tail[0], HumanMessage)
    if cut.kind == "assistant_boundary":  # only when no user turn fits
        assert not any(
            isinstance(messages[i], HumanMessage) and sum(tokens[i:]) <= keep
            for i in range(cut.start + 1, len(messages))
        )


def test_a_stray_tool_result_is_never_a_cut_position():
    messages = [
        ToolMessage("orphan", tool_call_id="x", id="t0"),
        HumanMessage("q", id="h1"),
        AIMessage("a", id="a1"),
    ]
    cut = choose_cut(messages, [10, 10, 10], keep_recent_tokens=10)
    assert cut is not None and cut.index in (1, 2)


def test_nothing_to_cover():
    assert choose_cut([HumanMessage("only", id="h")], [10], keep_recent_tokens=0) is None
    assert (
        choose_cut(
            [SystemMessage("s"), HumanMessage("only", id="h")], [1, 10], keep_recent_tokens=0
        )
        is None
    )
