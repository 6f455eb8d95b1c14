"""The history store's public branch methods, each a thin call of one operation of
:mod:`ctx_langgraph.history.branches`."""

from __future__ import annotations

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import branches as branch_ops
from ctx_langgraph.history._store import StoreBase
from ctx_langgraph.history.types import DEFAULT_TENANT, BranchInfo, Scope, ThreadRow

__all__ = ["BranchesAPI"]


class BranchesAPI(StoreBase):
    """Fork a branch, read one branch's row or every branch of a thread."""

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
