"""The ``compact_context`` tool: the model asks for a compaction of its own conversation (the
request goes in ``context["compact"]``, served before the model's next call)."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from ctx_langgraph.core.compact_request import compact_request
from ctx_langgraph.errors import CompactRequestError

__all__ = ["COMPACT_TOOL_NAME", "make_compact_tool"]

COMPACT_TOOL_NAME = "compact_context"
"""The name of the tool the model calls to ask for a compaction."""


class _CompactArgs(BaseModel):
    focus: str | None = Field(
        default=None,
        description=(
            "Optional: what the summary must keep above all, e.g. 'the API design decisions' "
            "or 'the open bugs and their file paths'."
        ),
    )
    tool_call_id: Annotated[str, InjectedToolCallId]


def _compact_context(focus: str | None = None, *, tool_call_id: str) -> Command[Any]:
    try:
        request = compact_request(focus, requested_by="model")
    except CompactRequestError as exc:
        refused = ToolMessage(
            f"Not compacted: {exc.problem}.",
            tool_call_id=tool_call_id,
            name=COMPACT_TOOL_NAME,
            status="error",
        )
        return Command(update={"messages": [refused]})
    note = "Compaction requested: older messages are summarized before your next step"
    note += f", keeping above all: {request['instructions']}." if request["instructions"] else "."
    return Command(
        update={
            "messages": [ToolMessage(note, tool_call_id=tool_call_id, name=COMPACT_TOOL_NAME)],
            "context": {"compact": request},
        }
    )


def make_compact_tool(name: str = COMPACT_TOOL_NAME) -> BaseTool:
    """The ``compact_context`` tool: the model asks for a compaction of the conversation, done
    before its next call, with an optional focus. It only puts the request in
    ``context["compact"]``; ``create_context_agent(..., compact_tool=True)`` adds it.

    Examples:
        >>> tool = make_compact_tool()
        >>> call = {"name": "compact_context", "args": {"focus": "the API decisions"},
        ...         "id": "call_1", "type": "tool_call"}
        >>> command = tool.invoke(call)
        >>> command.update["context"]
        {'compact': {'instructions': 'the API decisions', 'requested_by': 'model'}}
        >>> command.update["messages"][0].tool_call_id
        'call_1'
    """
    return StructuredTool.from_function(
        func=_compact_context,
        name=name,
        description=(
            "Compact the conversation: older messages are replaced by a structured summary "
            "before your next step, freeing room in the context window (the full history stays "
            "searchable). Use it when the conversation has grown long and earlier details are "
            "no longer needed word for word, or before a new sub-task. Give a focus to say what "
            "the summary must keep."
        ),
        args_schema=_CompactArgs,
    )
