"""The graph state our nodes read and write: messages plus a small ``context`` channel.

``context`` holds plain JSON values only (no sets, no custom classes: they break
``LANGGRAPH_STRICT_MSGPACK`` and bloat every checkpoint). Each node returns only the keys it
changes; the reducer merges them into the previous value.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

__all__ = ["ContextState", "merge_context"]


def merge_context(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer of the ``context`` channel: the update's keys replace the old ones.

    Example:
        >>> merge_context({"projection_epoch": 1, "baseline": {"measured_input_tokens": 10}}, {"projection_epoch": 2})
        {'projection_epoch': 2, 'baseline': {'measured_input_tokens': 10}}
    """
    return {**(left or {}), **(right or {})}


class ContextState(TypedDict, total=False):
    """Messages of the working view plus the context-management bookkeeping."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The working view: the summary message (once there is one) and the uncovered tail."""
    context: Annotated[dict[str, Any], merge_context]
    """Plain JSON bookkeeping: ``projection_epoch``, the capacity ``baseline`` (measured input
    tokens, ``input_through_message_id``, model, response id), the pending ``request``, the last
    usage booked."""
