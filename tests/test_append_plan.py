"""Property tests of the pure append planner: seqs are gap-free in first-appearance order,
duplicates keep their seq, changed content is a new revision."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from ctx_langgraph.history.events import plan_append
from ctx_langgraph.history.rows import message_to_row
from ctx_langgraph.history.types import Scope

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

batches = st.lists(
    st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["a", "b", "c"])), max_size=8),
    max_size=6,
)


@given(batches)
def test_plan_append_over_many_batches(batches):
    scope = Scope("t")
    known: dict = {}
    head = 0
    first_seen: list[int] = []
    content: dict[int, str] = {}
    revisions: dict[int, int] = {}
    for batch in batches:
        rows = [message_to_row(HumanMessage(text, id=f"m{n}")) for n, text in batch]
        plan = plan_append(scope, head, rows, [NOW] * len(rows), known)
        for (n, text), result in zip(batch, plan.results, strict=True):
            if n not in content:
                first_seen.append(n)
                content[n], revisions[n] = text, 1
                assert result.status == "appended"
            elif content[n] == text:
                assert result.status == "duplicate"
            else:
                content[n] = text
                revisions[n] += 1
                assert result.status == "revised"
            assert result.seq == first_seen.index(n) + 1
            assert result.revision == revisions[n]
        assert [seq for seq, _, _ in plan.inserts] == list(range(head + 1, plan.head_seq + 1))
        head = plan.head_seq
        # what the store would now know (the planner's own bookkeeping is internal)
        from ctx_langgraph.history.events import Known as _Known

        for n in content:
            row = message_to_row(HumanMessage(content[n], id=f"m{n}"))
            known[f"m{n}"] = _Known("main", first_seen.index(n) + 1, revisions[n], row.content_hash)
    assert head == len(first_seen)
