"""The history store interface, shared by the SQLite and PostgreSQL backends.

Every public method has an ``a``-prefixed async twin. Both build the same operation (a pure
generator of :mod:`~ctx_langgraph.history.events`, :mod:`~ctx_langgraph.history.branches`,
:mod:`~ctx_langgraph.history.search` or :mod:`~ctx_langgraph.history.summaries`) and hand it
to the database the store holds (``store.db``, a :class:`~ctx_langgraph.storage.runner.Database`),
so the logic exists once; a backend is the store over another database.
"""

from __future__ import annotations

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import branches as branch_ops
from ctx_langgraph.history._events_api import EventsAPI
from ctx_langgraph.history._search_api import SearchAPI
from ctx_langgraph.history._store import EditListener, async_twin, flow_method
from ctx_langgraph.history._summaries_api import SegmentsAPI, SummariesAPI
from ctx_langgraph.history.types import DEFAULT_TENANT, BranchInfo, Scope, ThreadRow

__all__ = ["EditListener", "HistoryStore"]


class HistoryStore(EventsAPI, SearchAPI, SummariesAPI, SegmentsAPI):
    """Raw history, compaction checkpoints, their active pointer, search (docs/design.md §4).

    Use :class:`~ctx_langgraph.history.SQLiteHistoryStore` (embedded default) or
    :class:`~ctx_langgraph.history.PostgresHistoryStore`; both pass the same conformance suite.
    Call :meth:`setup` once to create or migrate the tables.
    """

    @flow_method
    def create_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> Flow[BranchInfo]:
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
        return (yield from self._op(op, write=True))

    acreate_branch = async_twin(create_branch)

    @flow_method
    def branch_info(self, scope: Scope | str) -> Flow[BranchInfo | None]:
        """The branch's lineage, head seq and active pointer, or None if it has no row yet."""
        return (yield from self._op(branch_ops.branch_info(self.db.dialect, checked_scope(scope))))

    abranch_info = async_twin(branch_info)

    @flow_method
    def list_branches(self, scope: Scope | str) -> Flow[list[BranchInfo]]:
        """Every branch of the scope's thread."""
        return (
            yield from self._op(branch_ops.list_branches(self.db.dialect, checked_scope(scope)))
        )

    alist_branches = async_twin(list_branches)

    @flow_method
    def list_threads(
        self, tenant: str = DEFAULT_TENANT, *, limit: int = 500
    ) -> Flow[list[ThreadRow]]:
        """The tenant's threads, newest first (at most ``limit``)."""
        return (yield from self._op(branch_ops.list_threads(self.db.dialect, tenant, limit)))

    alist_threads = async_twin(list_threads)

    @flow_method
    def delete_thread(self, scope: Scope | str) -> Flow[dict[str, int]]:
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
        deleted = yield from self._op(branch_ops.delete_thread(checked_scope(scope)), write=True)
        yield from self._notify(checked_scope(scope), [], "thread_deleted")
        return deleted

    adelete_thread = async_twin(delete_thread)
