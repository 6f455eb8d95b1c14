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
from ctx_langgraph.history._events_api import EventsAPI
from ctx_langgraph.history._search_api import SearchAPI
from ctx_langgraph.history._store import EditListener
from ctx_langgraph.history._summaries_api import SegmentsAPI, SummariesAPI
from ctx_langgraph.history.types import DEFAULT_TENANT, BranchInfo, Scope, ThreadRow

__all__ = ["EditListener", "HistoryStore"]


class HistoryStore(EventsAPI, SearchAPI, SummariesAPI, SegmentsAPI):
    """Raw history, compaction checkpoints, their active pointer, search (docs/design.md §4).

    Use :class:`~ctx_langgraph.history.SQLiteHistoryStore` (embedded default) or
    :class:`~ctx_langgraph.history.PostgresHistoryStore`; both pass the same conformance suite.
    Call :meth:`setup` once to create or migrate the tables.
    """

    def create_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> BranchInfo:
        """Fork ``from_branch`` after ``fork_seq`` into ``scope.branch``.

        The new branch reads the parent's events up to ``fork_seq`` (shared, not copied) and its
        own after that; its seqs continue at ``fork_seq + 1``. Its active summary starts as the
        newest summary on the parent's chain that covers only shared events. Creating the same
        branch again with the same parent and fork point is a no-op.
        """
        parent = checked_scope(checked_scope(scope).on_branch(from_branch))
        op = branch_ops.create_branch(
            self.db.dialect, checked_scope(scope), parent.branch, fork_seq, self.clock()
        )
        return self.db.run(op, write=True)

    async def acreate_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> BranchInfo:
        """Async twin of :meth:`create_branch`."""
        parent = checked_scope(checked_scope(scope).on_branch(from_branch))
        op = branch_ops.create_branch(
            self.db.dialect, checked_scope(scope), parent.branch, fork_seq, self.clock()
        )
        return await self.db.arun(op, write=True)

    def branch_info(self, scope: Scope | str) -> BranchInfo | None:
        """The branch's lineage, head seq and active pointer, or None if it has no row yet."""
        return self.db.run(branch_ops.branch_info(self.db.dialect, checked_scope(scope)))

    async def abranch_info(self, scope: Scope | str) -> BranchInfo | None:
        """Async twin of :meth:`branch_info`."""
        return await self.db.arun(branch_ops.branch_info(self.db.dialect, checked_scope(scope)))

    def list_branches(self, scope: Scope | str) -> list[BranchInfo]:
        """Every branch of the scope's thread."""
        return self.db.run(branch_ops.list_branches(self.db.dialect, checked_scope(scope)))

    async def alist_branches(self, scope: Scope | str) -> list[BranchInfo]:
        """Async twin of :meth:`list_branches`."""
        return await self.db.arun(branch_ops.list_branches(self.db.dialect, checked_scope(scope)))

    def list_threads(self, tenant: str = DEFAULT_TENANT, *, limit: int = 500) -> list[ThreadRow]:
        """The tenant's threads, newest first (at most ``limit``)."""
        return self.db.run(branch_ops.list_threads(self.db.dialect, tenant, limit))

    async def alist_threads(
        self, tenant: str = DEFAULT_TENANT, *, limit: int = 500
    ) -> list[ThreadRow]:
        """Async twin of :meth:`list_threads`."""
        return await self.db.arun(branch_ops.list_threads(self.db.dialect, tenant, limit))

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
