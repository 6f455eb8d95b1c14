"""The checks of the parts a thread export carries besides the history: the usage ledger's
rows (``"ledger"``) and the thread's long-term memories (``"memories"``)."""

from __future__ import annotations

import json

from ctx_langgraph.history.args import shown
from ctx_langgraph.makeup import makeup_problem
from ctx_langgraph.threads._values import BIGINT, MISSING, Record, ValueChecks, at, fail
from ctx_langgraph.usage.ledger_rows import CALL_COLUMNS, OPTIONAL_COLUMNS, TOTAL_COLUMNS
from ctx_langgraph.usage.types import COUNT_FIELDS

__all__ = ["AttachedPartChecks"]

_CALL_STATUSES = ("complete", "partial", "unknown")
_MEMORY_FORMAT = "ctx_memory/v1"
_MEMORY_SCOPES = ("user", "project", "thread")
_MEMORY_STATUSES = ("active", "superseded", "invalid")


class AttachedPartChecks(ValueChecks):
    """The ledger and memories parts of a document."""

    def ledger(self, value: object) -> None:
        ledger = self.record("ledger", value)
        keys: set[str] = set()
        for index, item in enumerate(self.items("ledger.calls", ledger.get("calls"))):
            path = at("ledger.calls", index)
            call = self.mapping(path, item)
            row = Record(
                self,
                path,
                {
                    name: self.field(call, path, name, OPTIONAL_COLUMNS.get(name, MISSING))
                    for name in CALL_COLUMNS
                },
            )
            key = row.text("call_key", empty=False)
            if key in keys:
                fail(row.at("call_key"), f"call {key!r} is listed twice")
            keys.add(key)
            row.name("branch")
            row.text("purpose", empty=False)
            row.text("provider")
            row.text("model")
            row.choice("status", _CALL_STATUSES)
            row.integer("version", -1)
            row.optional_text("response_id")
            for column in (*COUNT_FIELDS, "cost_nano_usd", "cacheable_prefix"):
                row.optional_integer(column, 0)
            raw = row.text("raw")
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = None
            if not isinstance(decoded, dict):
                fail(row.at("raw"), f"expected a JSON object as text, got {shown(raw)}")
            self.makeup(row.at("makeup"), row.get("makeup"))
            row.time("created_at")
            row.time("updated_at")
        groups: set[tuple[str, ...]] = set()
        for index, item in enumerate(self.items("ledger.totals", ledger.get("totals"))):
            path = at("ledger.totals", index)
            total = self.mapping(path, item)
            row = Record(
                self,
                path,
                {
                    name: self.field(total, path, name, 0 if name in OPTIONAL_COLUMNS else MISSING)
                    for name in TOTAL_COLUMNS
                },
            )
            group = (
                row.name("branch"),
                row.text("purpose", empty=False),
                row.text("provider"),
                row.text("model"),
            )
            if group in groups:
                fail(path, f"the totals of {group!r} are listed twice")
            groups.add(group)
            for column in TOTAL_COLUMNS[4:]:
                # a billing correction books a negative difference: totals are any 64-bit int
                row.integer(column, -BIGINT)

    def makeup(self, path: str, value: object) -> None:
        """A call's make-up: None, or JSON text of a request's make-up whose parts sum to its
        estimate (:func:`~ctx_langgraph.makeup.makeup_problem`)."""
        text = self.optional_text(path, value)
        if text is None:
            return
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        problem = makeup_problem(decoded)
        if problem is not None:
            fail(path, f"expected a request's make-up as JSON text ({problem}), got {shown(text)}")

    def memories(self, value: object) -> None:
        for index, item in enumerate(self.items("memories", value)):
            record = self.record(at("memories", index), item)
            if "format" in record.row and record.row["format"] != _MEMORY_FORMAT:
                fail(
                    record.at("format"),
                    f"expected {_MEMORY_FORMAT!r}, got {shown(record.row['format'])}",
                )
            # memories go to the LangGraph store, not to this database's text columns
            record.text("id", empty=False, column=False)
            record.choice("scope", _MEMORY_SCOPES)
            record.text("owner", empty=False, column=False)
            for key in ("tenant", "content", "key", "kind", "source_thread"):
                record.optional_text(key, column=False, default=None)
            for key in ("superseded_by", "replaces"):
                record.optional_text(key, empty=False, column=False, default=None)
            where = record.at("source_event_ids")
            for position, event_id in enumerate(
                self.items(where, record.row.get("source_event_ids") or [])
            ):
                self.text(at(where, position), event_id, column=False)
            where = record.at("source_seqs")
            for position, seq in enumerate(self.items(where, record.row.get("source_seqs") or [])):
                self.integer(at(where, position), seq, 1)
            record.time("created_at")
            for key in ("updated_at", "expires_at"):
                if record.row.get(key) not in (None, ""):
                    record.time(key)
            confidence = record.row.get("confidence", 1.0)
            if (
                isinstance(confidence, bool)
                or not isinstance(confidence, (int, float))
                or not 0.0 <= confidence <= 1.0
            ):
                fail(
                    record.at("confidence"),
                    f"expected a number from 0 to 1, got {shown(confidence)}",
                )
            if record.row.get("status") not in (None, ""):
                record.choice("status", _MEMORY_STATUSES)
