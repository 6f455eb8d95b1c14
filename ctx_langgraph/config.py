"""``ContextConfig``: the knobs of the budget equation (docs/design.md §5).

pinned rules + system prompt + tool schemas + memory + summary + uncovered tail + retrieved snippets
  + output reserve + safety margin  <=  model context window
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctx_langgraph.core.timestamps import TimestampSource

__all__ = ["ContextConfig", "ResolvedBudget"]

Amount = int | float
"""An absolute token count (int) or a fraction of the usable window (float in (0, 1])."""


def _tokens(amount: Amount, of: int, name: str) -> int:
    if isinstance(amount, bool) or amount <= 0:
        raise ValueError(f"{name} must be positive, got {amount!r}")
    if isinstance(amount, float):
        if amount > 1:
            raise ValueError(f"{name} as a fraction must be at most 1, got {amount!r}")
        return math.floor(amount * of)
    return int(amount)


DEFAULT_OUTPUT_RESERVE = 16_384
"""The most the default output reserve keeps free for the reply."""


@dataclass(frozen=True)
class ResolvedBudget:
    """The budget in tokens for one model window."""

    context_window: int
    output_reserve: int
    usable: int
    """Window minus the output reserve: the most a request's input may be."""
    trigger: int
    target: int
    keep_recent_tokens: int
    precompact: int | None = None


@dataclass(frozen=True)
class ContextConfig:
    """How much context a thread may use, and when to compact.

    Args:
        context_window: the model's input window in tokens; None takes it from the chat model's
            profile (``model.profile["max_input_tokens"]``).
        output_reserve: tokens kept free for the reply (never eaten by the input). None (the
            default) keeps a quarter of the window, at most 16,384 tokens: 16,384 for a 128k
            window, 2,000 for an 8,000-token one.
        trigger: compaction starts when the estimate is above this (tokens, or a fraction of
            the usable window = window - reserve).
        target: compaction brings the estimate below this (< trigger), leaving room to work.
        keep_recent_tokens: the least recent tail kept verbatim by compaction (at most half the
            target, so the summary fits beside it).
        tail_fills_target: compaction keeps more than ``keep_recent_tokens`` when the target
            affords it: every recent message that fits under the target beside the fixed part
            of the request and a summary at its cap (docs/design.md §6). False keeps exactly
            ``keep_recent_tokens`` (fewer tokens per request, and compactions further apart).
        safety_margin: added to every estimate (tokens, or a fraction of the estimate).
        tool_output_cap_tokens: a tool result above this (or above a quarter of the usable
            window, whichever is less) is capped on entry (the original stays in the history
            store; the context gets a head/tail preview and a handle). None: no cap.
        clear_tool_results_keep: keep only the last K tool results verbatim; older ones become
            placeholders, persisted in the state so the prompt prefix stays stable. None: never.
        clear_tool_results_batch: clear only once at least this many results are past the last
            ``clear_tool_results_keep`` (then all of them at once): each clearing rewrites an old
            message and so moves the request's cacheable prefix back to it; in batches it moves
            once every N tool results instead of on every one.
        summary_max_tokens: the summary's cap (its real token length is checked before commit).
        artifact_trail_tokens: the cap of the artifact trail each summary carries (the files,
            URLs, ids and commands the thread touched, with their seqs and last known state;
            docs/design.md §6); over it, what was touched longest ago goes first, what was only
            read before what someone told of before what was changed. None: no trail.
        artifact_trail_room: where the trail's room comes from. ``"beside"``: its own, beside
            the summary's prose (up to the summary's cap: a compacted request is larger by the
            trail); ``"inside"``: out of the summary's cap (up to half of it; the prose gets the
            rest, and a compacted request stays the size it was). None (default): ``inside``
            when the history lookup tool is wired (the lookup reaches the whole history and the
            trail itself), else ``beside``.
        compaction_attempts: summarizer attempts before a compaction fails cleanly.
        compaction_timeout_s: time budget of all attempts of one compaction together.
        compaction_backoff_s: after a failed compaction the next one waits at least this long
            and a model call more, doubling with each failure in a row (up to 32 times this and
            33 budget passes); a request that would not fit the window does not wait: the offline
            extractive summarizer covers the span when the configured one fails again.
        precompact_at: above this (tokens or a fraction of the usable window; below ``trigger``) a
            summary candidate is built in the background from a snapshot, so that a later turn
            over the trigger can commit it without waiting for the summarizer. None: off.
        segment_events: the segment index: after a compaction, the history the summary covers
            is summarized in separate ranges of this many events (at most two ranges per
            compaction; in the background where ``precompact_at`` is set), for the history
            lookup to search (``make_history_lookup_tool(segments=True)``; the lookup tool of
            ``create_context_agent`` searches them when this is set). Never loaded into a
            prompt. None (the default): no index.
        segment_gap_s: a pause between two events longer than this (seconds) closes a segment
            early (a new session); None: segments close by count only.
        summary_versions_keep: superseded or failed summary versions kept per branch after each
            commit (the active one, and any another branch still uses, are always kept); None
            keeps every version.
        compaction_backend: ``"local"`` (our summarizers only, the default) or a provider
            adapter (:class:`~ctx_langgraph.providers.OpenAIResponsesCompaction`): the provider
            compacts the same span too, and its opaque window is sent instead of the readable
            summary while the thread stays on that provider.
        timestamp: when a message was said, for the history store (``message -> datetime``,
            None when not known). None (the default) reads the message's own
            ``created_at``/``timestamp`` in ``additional_kwargs`` or ``response_metadata``
            (ISO 8601, a datetime or epoch seconds). A message without a time gets the one
            before it in the same turn, else now; a value that cannot be read is counted in
            ``context["record_warnings"]`` and never stops the turn (docs/design.md §4).

    Examples:
        >>> budget = ContextConfig(context_window=128_000, output_reserve=16_000).resolve()
        >>> budget.usable, budget.trigger, budget.target
        (112000, 89600, 56000)
    """

    context_window: int | None = None
    output_reserve: int | None = None
    trigger: Amount = 0.8
    target: Amount = 0.5
    keep_recent_tokens: int = 20_000
    tail_fills_target: bool = True
    safety_margin: Amount = 0.02
    tool_output_cap_tokens: int | None = 8_000
    clear_tool_results_keep: int | None = None
    clear_tool_results_batch: int = 4
    summary_max_tokens: int = 2_000
    artifact_trail_tokens: int | None = 1_000
    artifact_trail_room: Literal["beside", "inside"] | None = None
    compaction_attempts: int = 3
    compaction_timeout_s: float = 120.0
    compaction_backoff_s: float = 5.0
    summary_versions_keep: int | None = 5
    precompact_at: Amount | None = None
    segment_events: int | None = None
    segment_gap_s: float | None = 6 * 3600.0
    compaction_backend: Any = "local"
    timestamp: TimestampSource | None = None

    def __post_init__(self) -> None:
        if self.timestamp is not None and not callable(self.timestamp):
            raise TypeError(
                f"timestamp must be a callable (message -> datetime | None) or None, "
                f"got {type(self.timestamp).__name__}"
            )
        backend = self.compaction_backend
        if backend != "local" and not (
            callable(getattr(backend, "compact", None))
            and callable(getattr(backend, "acompact", None))
            and isinstance(getattr(backend, "provider", None), str)
        ):
            raise ValueError(
                f"compaction_backend must be 'local' or a provider adapter with compact(), "
                f"acompact() and a provider name, got {backend!r}"
            )
        if self.context_window is not None and self.context_window <= 0:
            raise ValueError(f"context_window must be positive, got {self.context_window}")
        if self.output_reserve is not None and self.output_reserve < 0:
            raise ValueError(f"output_reserve must be >= 0, got {self.output_reserve}")
        if self.tool_output_cap_tokens is not None and self.tool_output_cap_tokens < 64:
            raise ValueError(
                f"tool_output_cap_tokens must be at least 64, got {self.tool_output_cap_tokens}"
            )
        if self.segment_events is not None and self.segment_events < 4:
            raise ValueError(
                f"segment_events must be at least 4 (or None: no index), got {self.segment_events}"
            )
        if self.segment_gap_s is not None and not self.segment_gap_s > 0:
            raise ValueError(f"segment_gap_s must be positive (or None), got {self.segment_gap_s}")
        if self.summary_max_tokens < 64:
            raise ValueError(
                f"summary_max_tokens must be at least 64, got {self.summary_max_tokens}"
            )
        if self.artifact_trail_tokens is not None and self.artifact_trail_tokens < 64:
            raise ValueError(
                f"artifact_trail_tokens must be at least 64 (or None: no trail), got "
                f"{self.artifact_trail_tokens}"
            )
        if self.artifact_trail_room not in (None, "beside", "inside"):
            raise ValueError(
                f"artifact_trail_room must be 'beside', 'inside' or None, got "
                f"{self.artifact_trail_room!r}"
            )
        if self.compaction_attempts < 1 or not self.compaction_timeout_s > 0:
            raise ValueError("compaction_attempts must be >= 1 and compaction_timeout_s > 0")
        if not 0 <= self.compaction_backoff_s < float("inf"):
            raise ValueError(
                f"compaction_backoff_s must be a finite number >= 0, got {self.compaction_backoff_s}"
            )
        if self.clear_tool_results_keep is not None and self.clear_tool_results_keep < 0:
            raise ValueError(
                f"clear_tool_results_keep must be >= 0, got {self.clear_tool_results_keep}"
            )
        if self.clear_tool_results_batch < 1:
            raise ValueError(
                f"clear_tool_results_batch must be >= 1, got {self.clear_tool_results_batch}"
            )
        if self.context_window is not None:
            self.resolve()  # fail early on an impossible combination

    def window_for(self, model: Any = None) -> int:
        """The context window: configured, else from the chat model's profile."""
        if self.context_window is not None:
            return self.context_window
        profile = getattr(model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
        if isinstance(window, int) and window > 0:
            return window
        raise ValueError(
            "ContextConfig.context_window is not set and the chat model has no profile with "
            "max_input_tokens; set context_window=<tokens>"
        )

    def reserve_for(self, window: int) -> int:
        """The output reserve for ``window``: configured, else a quarter of it, at most 16,384.

        Examples:
            >>> ContextConfig().reserve_for(128_000), ContextConfig().reserve_for(8_000)
            (16384, 2000)
        """
        if self.output_reserve is not None:
            return self.output_reserve
        return min(DEFAULT_OUTPUT_RESERVE, window // 4)

    def artifact_trail_cap(self, summary_cap: int) -> int:
        """The artifact trail's token cap beside a summary capped at ``summary_cap``:
        ``artifact_trail_tokens``, at most ``summary_cap`` beside it, at most half of it inside
        it (``artifact_trail_room``; unset counts as beside); 0 without a trail.

        Examples:
            >>> ContextConfig().artifact_trail_cap(2_000), ContextConfig().artifact_trail_cap(597)
            (1000, 597)
            >>> ContextConfig(artifact_trail_room="inside").artifact_trail_cap(597)
            298
            >>> ContextConfig(artifact_trail_tokens=None).artifact_trail_cap(2_000)
            0
        """
        tokens = self.artifact_trail_tokens
        if tokens is None:
            return 0
        return min(tokens, summary_cap // 2 if self.trail_inside else summary_cap)

    @property
    def trail_inside(self) -> bool:
        """The artifact trail takes its room out of the summary's cap (``artifact_trail_room``)."""
        return self.artifact_trail_room == "inside"

    def with_trail_room(self, lookup: bool) -> ContextConfig:
        """This configuration with ``artifact_trail_room`` decided when unset: ``inside`` when
        the history lookup tool is wired (``lookup``), else ``beside``.

        Examples:
            >>> ContextConfig().with_trail_room(lookup=True).artifact_trail_room
            'inside'
            >>> ContextConfig(artifact_trail_room="beside").with_trail_room(True).artifact_trail_room
            'beside'
        """
        if self.artifact_trail_room is not None:
            return self
        return replace(self, artifact_trail_room="inside" if lookup else "beside")

    def margin(self, estimate: int) -> int:
        if isinstance(self.safety_margin, float):
            return math.ceil(estimate * self.safety_margin)
        return int(self.safety_margin)

    def resolve(self, model: Any = None) -> ResolvedBudget:
        """The budget in tokens for the configured (or the model's) window."""
        window = self.window_for(model)
        reserve = self.reserve_for(window)
        if reserve >= window:
            raise ValueError(
                f"output_reserve {reserve} leaves nothing of the {window}-token window: set "
                f"output_reserve below {window} (e.g. {window // 4}), or leave it unset for a "
                "quarter of the window"
            )
        usable = window - reserve
        trigger = _tokens(self.trigger, usable, "trigger")
        target = _tokens(self.target, usable, "target")
        if trigger > usable:
            raise ValueError(
                f"trigger {trigger} is above the usable window {usable} (window - output_reserve)"
            )
        if target >= trigger:
            raise ValueError(f"target ({target} tokens) must be below trigger ({trigger} tokens)")
        precompact = (
            None
            if self.precompact_at is None
            else _tokens(self.precompact_at, usable, "precompact_at")
        )
        if precompact is not None and precompact >= trigger:
            raise ValueError(
                f"precompact_at ({precompact} tokens) must be below trigger ({trigger} tokens)"
            )
        return ResolvedBudget(
            window,
            reserve,
            usable,
            trigger,
            target,
            min(self.keep_recent_tokens, target // 2),  # room for the summary beside the tail
            precompact,
        )
