"""The checks of the parts a thread export carries besides the history: the usage ledger's
rows (``"ledger"``) and the thread's long-term memories (``"memories"``)."""

from __future__ import annotations

import json

from ctx_langgraph.history.args import shown
from ctx_langgraph.makeup import makeup_problem
from ctx_langgraph.threads._values import BIGINT, MISSING, ValueChecks, at, fail
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
        ledger = self.mapping("ledger", value)
        keys: set[str] = set()
        for index, item in enumerate(
            self.items("ledger.calls", self.field(ledger, "ledger", "calls"))
        ):
            path = at("ledger.calls", index)
            call = self.mapping(path, item)
            values = {
                name: self.field(call, path, name, OPTIONAL_COLUMNS.get(name, MISSING))
                for name in CALL_COLUMNS
            }
            key = self.text(at(path, "call_key"), values["call_key"], empty=False)
            if key in keys:
                fail(at(path, "call_key"), f"call {key!r} is listed twice")
            keys.add(key)
            self.name(at(path, "branch"), values["branch"])
            self.text(at(path, "purpose"), values["purpose"], empty=False)
            for column in ("provider", "model"):
                self.text(at(path, column), values[column])
            self.choice(at(path, "status"), values["status"], _CALL_STATUSES)
            self.integer(at(path, "version"), values["version"], -1)
            self.optional_text(at(path, "response_id"), values["response_id"])
            for column in (*COUNT_FIELDS, "cost_nano_usd", "cacheable_prefix"):
                self.optional_integer(at(path, column), values[column], 0)
            raw = self.text(at(path, "raw"), values["raw"])
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = None
            if not isinstance(decoded, dict):
                fail(at(path, "raw"), f"expected a JSON object as text, got {shown(raw)}")
            self.makeup(at(path, "makeup"), values["makeup"])
            for column in ("created_at", "updated_at"):
                self.time(at(path, column), values[column])
        groups: set[tuple[str, ...]] = set()
        for index, item in enumerate(
            self.items("ledger.totals", self.field(ledger, "ledger", "totals"))
        ):
            path = at("ledger.totals", index)
            total = self.mapping(path, item)
            values = {
                name: self.field(total, path, name, 0 if name in OPTIONAL_COLUMNS else MISSING)
                for name in TOTAL_COLUMNS
            }
            group = (
                self.name(at(path, "branch"), values["branch"]),
                self.text(at(path, "purpose"), values["purpose"], empty=False),
                self.text(at(path, "provider"), values["provider"]),
                self.text(at(path, "model"), values["model"]),
            )
            if group in groups:
                fail(path, f"the totals of {group!r} are listed twice")
            groups.add(group)
            for column in TOTAL_COLUMNS[4:]:
                # a billing correction books a negative difference: totals are any 64-bit int
                self.integer(at(path, column), values[column], -BIGINT)

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
            path = at("memories", index)
            record = self.mapping(path, item)
            if "format" in record and record["format"] != _MEMORY_FORMAT:
                fail(
                    at(path, "format"),
                    f"expected {_MEMORY_FORMAT!r}, got {shown(record['format'])}",
                )
            # memories go to the LangGraph store, not to this database's text columns
            self.text(at(path, "id"), self.field(record, path, "id"), empty=False, column=False)
            self.choice(at(path, "scope"), self.field(record, path, "scope"), _MEMORY_SCOPES)
            owner = self.field(record, path, "owner")
            self.text(at(path, "owner"), owner, empty=False, column=False)
            for key in ("tenant", "content", "key", "kind", "source_thread"):
                self.optional_text(at(path, key), record.get(key), column=False)
            for key in ("superseded_by", "replaces"):
                self.optional_text(at(path, key), record.get(key), empty=False, column=False)
            where = at(path, "source_event_ids")
            for position, event_id in enumerate(
                self.items(where, record.get("source_event_ids") or [])
            ):
                self.text(at(where, position), event_id, column=False)
            where = at(path, "source_seqs")
            for position, seq in enumerate(self.items(where, record.get("source_seqs") or [])):
                self.integer(at(where, position), seq, 1)
            self.time(at(path, "created_at"), self.field(record, path, "created_at"))
            for key in ("updated_at", "expires_at"):
                if record.get(key) not in (None, ""):
                    self.time(at(path, key), record[key])
            confidence = record.get("confidence", 1.0)
            if (
                isinstance(confidence, bool)
                or not isinstance(confidence, (int, float))
                or not 0.0 <= confidence <= 1.0
            ):
                fail(
                    at(path, "confidence"),
                    f"expected a number from 0 to 1, got {shown(confidence)}",
                )
            if record.get("status") not in (None, ""):
                self.choice(at(path, "status"), record["status"], _MEMORY_STATUSES)
