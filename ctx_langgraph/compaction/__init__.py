"""Compaction: the rolling summary with a coverage cursor (docs/design.md §6)."""

from ctx_langgraph.compaction.artifacts import Touch, span_touches
from ctx_langgraph.compaction.cut import (
    CutPoint,
    choose_cut,
    first_coverable,
    pairing_problems,
    tool_groups,
)
from ctx_langgraph.compaction.format import (
    REQUIRED_SECTIONS,
    SUMMARY_FORMAT_VERSION,
    KeyStatement,
    SummaryDocument,
    SummaryItem,
    validate_summary,
)
from ctx_langgraph.compaction.node import (
    SUMMARY_MESSAGE_ID,
    CompactNode,
    make_compact_node,
    summary_message,
)
from ctx_langgraph.compaction.on_request import acompact_thread, compact_thread
from ctx_langgraph.compaction.summarizers import (
    SUMMARY_TAG,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryRequest,
    extract_key_facts,
)
from ctx_langgraph.compaction.tool import COMPACT_TOOL_NAME, make_compact_tool
from ctx_langgraph.compaction.trail import TRAIL_HEADING, ArtifactEntry, ArtifactTrail

__all__ = [
    "COMPACT_TOOL_NAME",
    "REQUIRED_SECTIONS",
    "SUMMARY_FORMAT_VERSION",
    "SUMMARY_MESSAGE_ID",
    "SUMMARY_TAG",
    "TRAIL_HEADING",
    "ArtifactEntry",
    "ArtifactTrail",
    "CompactNode",
    "CutPoint",
    "ExtractiveSummarizer",
    "KeyStatement",
    "LLMSummarizer",
    "Summarizer",
    "SummaryDocument",
    "SummaryItem",
    "SummaryRequest",
    "Touch",
    "acompact_thread",
    "choose_cut",
    "compact_thread",
    "extract_key_facts",
    "first_coverable",
    "make_compact_node",
    "make_compact_tool",
    "pairing_problems",
    "span_touches",
    "summary_message",
    "tool_groups",
    "validate_summary",
]
