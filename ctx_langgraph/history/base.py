"""The history store interface, shared by the SQLite and PostgreSQL backends.

Every public method has an ``a``-prefixed async twin. Both build the same operation (a pure
generator of :mod:`~ctx_langgraph.history.events`, :mod:`~ctx_langgraph.history.branches`,
:mod:`~ctx_langgraph.history.search` or :mod:`~ctx_langgraph.history.summaries`) and hand it
to the database the store holds (``store.db``, a :class:`~ctx_langgraph.storage.runner.Database`),
so the logic exists once; a backend is the store over another database.
"""

from __future__ import annotations

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import branches as branch_ops
from ctx_langgraph.history._branches_api import BranchesAPI
from ctx_langgraph.history._events_api import EventsAPI
from ctx_langgraph.history._search_api import SearchAPI
from ctx_langgraph.history._segments_api import SegmentsAPI
from ctx_langgraph.history._store import EditListener
from ctx_langgraph.history._summaries_api import SummariesAPI
from ctx_langgraph.history.types import Scope

__all__ = ["EditListener", "HistoryStore"]


class HistoryStore(EventsAPI, BranchesAPI, SearchAPI, SummariesAPI, SegmentsAPI):
    """Raw history, compaction checkpoints, their active pointer, search (docs/design.md §4).

    Use :class:`~ctx_langgraph.history.SQLiteHistoryStore` (embedded default) or
    :class:`~ctx_langgraph.history.PostgresHistoryStore`; both pass the same conformance suite.
    Call :meth:`setup` once to create or migrate the tables.
    """

    def delete_thread(self, scope: Scope | str) -> dict[str, int]:
        """Forget a thread's history: its events and their revisions, edit log, summary
        versions, branches and thread row, all branches at once, in one transaction (the branch
        of ``scope`` does not matter). Returns the rows deleted per table. The usage ledger's
        rows stay: :func:`ctx_langgraph.threads.delete_thread` deletes those too on request.

        LangGraph's checkpoints are not here: delete them with the checkpointer's own
        ``delete_thread(thread_id)``. Edit listeners (a wired
        :class:`~ctx_langgraph.memory.LongTermMemory`) delete the thread's memories and purge
        those derived from it.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
            ...     store.delete_thread("t")["ctx_events"], store.read_events("t")
            (1, [])
        """
        deleted = self.db.run(branch_ops.delete_thread(checked_scope(scope)), write=True)
        self.notify_edited(checked_scope(scope), [], "thread_deleted")
        return deleted

    async def adelete_thread(self, scope: Scope | str) -> dict[str, int]:
        """Async twin of :meth:`delete_thread`."""
        deleted = await self.db.arun(branch_ops.delete_thread(checked_scope(scope)), write=True)
        await self.anotify_edited(checked_scope(scope), [], "thread_deleted")
        return deleted
