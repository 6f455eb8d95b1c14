"""A seeded, tool-heavy agent session to replay: an ops and billing support agent at work.

:func:`tool_session` writes a long session between a support engineer and an assistant that
uses four tools (:data:`TOOL_NAMES`, described by :func:`tool_specs`): order searches, invoices,
config files and shell commands, with parallel calls, failed calls that are retried, and giant
tool outputs (CSV exports, log dumps, listings of 8,000 to 16,000 characters).

Facts are planted along the way: order, ticket and invoice ids, amounts and file paths, each
stated once (by the user or inside a tool output, sometimes in the middle of a giant output),
about a subject no other message names. Some are corrected by the user much later. Every fact
gives a :class:`~ctx_langgraph.datasets.QAItem` whose ``evidence`` names the stating message (the
correction, for corrected facts) and whose ``query`` holds keywords found together in that
message only. A planted value appears nowhere else, so an answer can only come from its evidence.

The word tables and text templates are data (``data/*.json``, read once); the modules hold the
generators: filler values and record formats (``_words``), filler turns (``_fillers``), giant
outputs (``_giants``), planted facts (``_facts``) and the session itself (``_session``).
"""

from ctx_langgraph.eval.synthetic._session import MAX_TURNS, TOOL_NAMES, tool_session, tool_specs

__all__ = ["MAX_TURNS", "TOOL_NAMES", "tool_session", "tool_specs"]
