"""``ContextConfig``: the knobs of the budget equation (docs/design.md §5).

pinned rules + system prompt + tool schemas + memory + summary + uncovered tail + retrieved snippets
  + output reserve + safety margin  <=  model context window
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from ctx_langgraph.core.arguments import check_amount, check_count, check_seconds, is_count
from ctx_langgraph.core.timestamps import TimestampSource

__all__ = ["ContextConfig", "ResolvedBudget", "ToolClearing"]

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


def _check_below(
    lower_name: str, lower: Amount | None, upper_name: str, upper: Amount, why: str
) -> None:
    """``lower`` below ``upper`` when both are fractions or both tokens (mixed: when the window
    is known, in :meth:`ContextConfig.resolve`)."""
    if lower is None or is_count(lower) != is_count(upper) or lower < upper:
        return
    raise ValueError(
        f"ContextConfig.{lower_name}={lower!r} must be below {upper_name}={upper!r}: {why}"
    )


def _check_types(config: ContextConfig) -> None:
    """Every field of ``config`` of its type and in its range, named when it is not."""
    check_count("ContextConfig", "context_window", config.context_window, 1, optional=True)
    check_count("ContextConfig", "output_reserve", config.output_reserve, 0, optional=True)
    check_amount("ContextConfig", "trigger", config.trigger)
    check_amount("ContextConfig", "target", config.target)
    check_amount("ContextConfig", "safety_margin", config.safety_margin, zero=True)
    if config.precompact_at is not None:
        check_amount("ContextConfig", "precompact_at", config.precompact_at)
    _check_below(
        "target",
        config.target,
        "trigger",
        config.trigger,
        "compaction starts when the estimate is above trigger and brings it below target",
    )
    _check_below(
        "precompact_at",
        config.precompact_at,
        "trigger",
        config.trigger,
        "a summary is prepared in the background above precompact_at, before the trigger",
    )
    check_count("ContextConfig", "keep_recent_tokens", config.keep_recent_tokens, 0)
    if not isinstance(config.tail_fills_target, bool):
        raise TypeError(
            f"ContextConfig.tail_fills_target={config.tail_fills_target!r}: expected a bool"
        )
    check_count(
        "ContextConfig", "tool_output_cap_tokens", config.tool_output_cap_tokens, 64, optional=True
    )
    check_count(
        "ContextConfig", "clear_tool_results_keep", config.clear_tool_results_keep, 0, optional=True
    )
    check_count("ContextConfig", "clear_tool_results_batch", config.clear_tool_results_batch, 1)
    check_count("ContextConfig", "summary_max_tokens", config.summary_max_tokens, 64)
    check_count(
        "ContextConfig", "artifact_trail_tokens", config.artifact_trail_tokens, 64, optional=True
    )
    check_count("ContextConfig", "compaction_attempts", config.compaction_attempts, 1)
    check_count("ContextConfig", "max_compaction_rounds", config.max_compaction_rounds, 1)
    check_seconds("ContextConfig", "compaction_timeout_s", config.compaction_timeout_s)
    check_seconds("ContextConfig", "compaction_backoff_s", config.compaction_backoff_s, zero=True)
    check_count(
        "ContextConfig", "summary_versions_keep", config.summary_versions_keep, 0, optional=True
    )
    check_count("ContextConfig", "segment_events", config.segment_events, 4, optional=True)
    check_seconds("ContextConfig", "segment_gap_s", config.segment_gap_s, optional=True)


_CAPS_OF_THE_WINDOW = ("summary_max_tokens", "tool_output_cap_tokens")
"""Token caps that a window smaller than their default scales down, and that a value set above
the usable window cannot mean. (``keep_recent_tokens`` is a floor that compaction already takes
at most half the target of, so a large one is honoured as "as much as fits".)"""


def _check_caps(config: ContextConfig, window: int, usable: int) -> None:
    """A cap set (not left at its default) above the usable window is a mistake: say which."""
    defaults = {f.name: f.default for f in fields(config)}
    for name in _CAPS_OF_THE_WINDOW:
        value = getattr(config, name)
        if value is not None and value != defaults[name] and value > usable:
            raise ValueError(
                f"ContextConfig.{name}={value:,} is larger than the usable window: {usable:,} "
                f"tokens (context window {window:,} - output reserve {window - usable:,}); set "
                f"it below {usable:,}, or use a model with a larger window"
            )


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


def _clearing_error(name: str, value: object, expected: str) -> TypeError:
    return TypeError(f"ToolClearing.{name}={value!r} ({type(value).__name__}): expected {expected}")


@dataclass(frozen=True)
class ToolClearing:
    """When and how ``ctx_budget`` clears old tool results from the view
    (``ContextConfig(tool_clearing=ToolClearing(...))``).

    The options of LangChain's ``ClearToolUsesEdit`` and Anthropic's ``clear_tool_uses_20250919``,
    with their names. A cleared result is replaced by a placeholder in the state (kept there,
    so the request's cacheable prefix moves once per clearing, not on every turn); the original
    stays in the history store, and ``history_lookup`` reads it back by the handle the
    placeholder names. The results of the model's latest tool calls, which it has not read yet,
    are never cleared.

    Args:
        keep: the most recent tool results kept whole, of any tool (an excluded tool's count
            too, as LangChain's and Anthropic's ``keep`` count them). Default 3, as theirs.
        trigger: clear only when the next request's estimate, safety margin included, is above
            this: tokens (int), or a fraction of the usable window (float in (0, 1]), as
            ``ContextConfig.trigger``. None (the default): whenever a result is past ``keep``.
            LangChain's and Anthropic's default is 100,000 tokens; here compaction starts at
            80% of the usable window (89,600 tokens of a 128k window), so that default would
            rarely clear before compaction does.
        clear_at_least: the tokens a clearing must reclaim. When the due results together
            reclaim less, none is cleared (a small saving is not worth the prompt cache it
            invalidates, as Anthropic's); else the oldest are cleared until at least this much
            is reclaimed (as LangChain's). 0 (the default): every due result at once.
        batch: clear only once at least this many results are due, then all of them together:
            fewer, larger clearings, so the cacheable prefix moves less often. Default 1.
        exclude_tools: names of the tools whose results are never cleared. Default: none.
        clear_lookup_results: clear the history lookup tool's pages like any other result.
            False (the default): a page the model asked for stays until compaction covers it.
        clear_tool_inputs: also replace the arguments of each cleared result's call with
            ``{}`` (in ``tool_calls`` and in the provider's content blocks); the call and its id
            stay, so every result keeps its call. The original call stays in the history store.
            Default False.
        placeholder: the text of a cleared result; ``{tool}``, ``{handle}``, ``{seq}`` and
            ``{tokens}`` in it are filled in (LangChain's is ``"[cleared]"``). None (the
            default): a sentence that says how to read it again, e.g. ``[tool result cleared to
            save context: 1,250 tokens; kept as history:t1 (seq 7); read it again by calling
            history_lookup with handle="history:t1"]``.

    Examples:
        >>> clearing = ToolClearing(keep=2, exclude_tools=["search"], trigger=0.5)
        >>> clearing.exclude_tools, clearing.trigger_tokens(usable=100_000)
        (('search',), 50000)
        >>> ToolClearing(placeholder="[{tool} output cleared: {handle}]").placeholder_text(
        ...     tool="read_file", handle="history:t1", seq=7, tokens=1_250)
        '[read_file output cleared: history:t1]'
    """

    keep: int = 3
    trigger: Amount | None = None
    clear_at_least: int = 0
    batch: int = 1
    exclude_tools: Sequence[str] = ()
    clear_lookup_results: bool = False
    clear_tool_inputs: bool = False
    placeholder: str | None = None

    def __post_init__(self) -> None:
        for name, minimum in (("keep", 0), ("clear_at_least", 0), ("batch", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise _clearing_error(name, value, f"an int >= {minimum}")
            if value < minimum:
                raise ValueError(f"ToolClearing.{name}={value!r}: expected an int >= {minimum}")
        trigger, expected = (
            self.trigger,
            "tokens (an int > 0), a fraction of the usable window (a float in (0, 1]) or None",
        )
        if trigger is not None:
            if not isinstance(trigger, int | float) or isinstance(trigger, bool):
                raise _clearing_error("trigger", trigger, expected)
            if not (0 < trigger <= (1 if isinstance(trigger, float) else math.inf)):
                raise ValueError(f"ToolClearing.trigger={trigger!r}: expected {expected}")
        tools = self.exclude_tools
        if isinstance(tools, str):
            raise TypeError(
                f"ToolClearing.exclude_tools={tools!r} is one string: expected tool names, "
                f"e.g. exclude_tools=({tools!r},)"
            )
        try:
            names = tuple(tools)
        except TypeError:
            raise _clearing_error("exclude_tools", tools, "a list of tool names") from None
        if not all(isinstance(name, str) and name for name in names):
            raise ValueError(
                f"ToolClearing.exclude_tools={tools!r}: expected tool names (non-empty strings)"
            )
        object.__setattr__(self, "exclude_tools", names)  # frozen: hashable, never shared
        for flag in ("clear_lookup_results", "clear_tool_inputs"):
            if not isinstance(getattr(self, flag), bool):
                raise _clearing_error(flag, getattr(self, flag), "True or False")
        placeholder = self.placeholder
        if placeholder is not None and not isinstance(placeholder, str):
            raise _clearing_error("placeholder", placeholder, "a string or None")
        if placeholder is not None and not placeholder.strip():
            raise ValueError(
                f"ToolClearing.placeholder={placeholder!r}: expected text the model can read "
                '(e.g. "[cleared]"), or None for the default'
            )

    def trigger_tokens(self, usable: int) -> int | None:
        """The trigger in tokens for a usable window of ``usable`` tokens (None: no trigger)."""
        if self.trigger is None:
            return None
        if isinstance(self.trigger, float):
            return math.floor(self.trigger * usable)
        return int(self.trigger)

    def placeholder_text(self, *, tool: str, handle: str, seq: int | None, tokens: int) -> str:
        """The configured placeholder with its fields filled in (None: the caller's default)."""
        assert self.placeholder is not None
        values = {
            "tool": tool,
            "handle": handle,
            "seq": "" if seq is None else str(seq),
            "tokens": f"{tokens:,}",
        }
        text = self.placeholder
        for name, value in values.items():  # (not str.format: braces of the user's own stay)
            text = text.replace("{" + name + "}", value)
        return text


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
            store; the context gets a head/tail preview and a handle). None: no cap on a result
            alone. Either way the results of one step (parallel calls) that together would
            overflow the room the window leaves them are shortened alike.
        clear_tool_results_keep: keep only the last K tool results verbatim; older ones become
            placeholders, persisted in the state so the prompt prefix stays stable. None (the
            default): never. The same as ``tool_clearing=ToolClearing(keep=K, batch=B)``.
        clear_tool_results_batch: clear only once at least this many results are past the last
            ``clear_tool_results_keep`` (then all of them at once): each clearing rewrites an old
            message and so moves the request's cacheable prefix back to it; in batches it moves
            once every N tool results instead of on every one. Default 4.
        tool_clearing: clearing old tool results with every option (:class:`ToolClearing`:
            keep, a trigger in tokens, the least to reclaim, tools never cleared, the calls'
            inputs, the placeholder text); instead of the two fields above. None (the
            default): as those say.
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
        max_compaction_rounds: how many times one request (the view up to its last message)
            may go ``ctx_budget`` -> ``ctx_compact`` (the middleware's inline loop alike).
            Every round must make progress: the estimate falls, or new history is covered; a
            round that does not (a summary that covers the view already, nothing left to cut,
            a summary as long as what it replaces) is the last. Then the request goes on over
            the trigger when it fits the usable window; when it does not, one round of the
            offline extractive summarizer cutting deeper, and
            :class:`~ctx_langgraph.errors.ContextBudgetExceeded` only when nothing fits.
            ``context["compaction"]`` counts the ``rounds`` and says why it ``stopped``.
            Default 3.
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

    Raises:
        TypeError: a field of the wrong type (``context_window="4k"``, a bool where a number
            goes); the message names the field, the value and what is expected.
        ValueError: a value out of its range (a fraction above 1, NaN, a negative count),
            ``target`` not below ``trigger`` (or ``precompact_at`` not below it) when both are
            fractions or both tokens, and, once the window is known (here when
            ``context_window`` is set, else when the nodes are built from the model's
            profile, before any model call): a combination that leaves no room, or a
            ``summary_max_tokens`` or ``tool_output_cap_tokens`` set above the usable window. The same checks run on :func:`dataclasses.replace`.

    Examples:
        >>> budget = ContextConfig(context_window=128_000, output_reserve=16_000).resolve()
        >>> budget.usable, budget.trigger, budget.target
        (112000, 89600, 56000)
        >>> ContextConfig(trigger=0.3, target=0.6)
        Traceback (most recent call last):
        ...
        ValueError: ContextConfig.target=0.6 must be below trigger=0.3: compaction starts when the estimate is above trigger and brings it below target
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
    tool_clearing: ToolClearing | None = None
    summary_max_tokens: int = 2_000
    artifact_trail_tokens: int | None = 1_000
    artifact_trail_room: Literal["beside", "inside"] | None = None
    compaction_attempts: int = 3
    max_compaction_rounds: int = 3
    compaction_timeout_s: float = 120.0
    compaction_backoff_s: float = 5.0
    summary_versions_keep: int | None = 5
    precompact_at: Amount | None = None
    segment_events: int | None = None
    segment_gap_s: float | None = 6 * 3600.0
    compaction_backend: Any = "local"
    timestamp: TimestampSource | None = None

    def __post_init__(self) -> None:
        _check_types(self)
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
        if self.artifact_trail_room not in (None, "beside", "inside"):
            raise ValueError(
                f"artifact_trail_room must be 'beside', 'inside' or None, got "
                f"{self.artifact_trail_room!r}"
            )
        self._check_tool_clearing()
        if self.context_window is not None:
            self.resolve()  # fail early on an impossible combination

    def _check_tool_clearing(self) -> None:
        clearing = self.tool_clearing
        if clearing is None:
            return
        if not isinstance(clearing, ToolClearing):
            raise TypeError(
                f"ContextConfig.tool_clearing={clearing!r} ({type(clearing).__name__}): expected "
                "a ToolClearing (from ctx_langgraph import ToolClearing) or None"
            )
        if self.clear_tool_results_keep is not None:
            raise ValueError(
                f"ContextConfig.tool_clearing and clear_tool_results_keep="
                f"{self.clear_tool_results_keep} are both set: set keep in ToolClearing(keep="
                f"{self.clear_tool_results_keep}, ...), not both"
            )
        if self.clear_tool_results_batch != 4:
            raise ValueError(
                f"ContextConfig.clear_tool_results_batch={self.clear_tool_results_batch} is "
                f"ignored beside tool_clearing: set ToolClearing.batch="
                f"{self.clear_tool_results_batch} instead"
            )

    def clearing(self) -> ToolClearing | None:
        """How old tool results are cleared: ``tool_clearing``, else what
        ``clear_tool_results_keep`` and ``clear_tool_results_batch`` say; None: never.

        Examples:
            >>> ContextConfig(clear_tool_results_keep=2).clearing()
            ToolClearing(keep=2, trigger=None, clear_at_least=0, batch=4, exclude_tools=(), clear_lookup_results=False, clear_tool_inputs=False, placeholder=None)
            >>> ContextConfig().clearing() is None
            True
        """
        if self.tool_clearing is not None:
            return self.tool_clearing
        if self.clear_tool_results_keep is None:
            return None
        return ToolClearing(keep=self.clear_tool_results_keep, batch=self.clear_tool_results_batch)

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

    def summary_cap(self, target: int) -> int:
        """A summary's token cap under a budget's ``target``: ``summary_max_tokens``, at most
        half the target (at least 64).

        Examples:
            >>> ContextConfig().summary_cap(100_000), ContextConfig().summary_cap(1_000)
            (2000, 500)
        """
        return min(self.summary_max_tokens, max(64, target // 2))

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
        _check_caps(self, window, usable)
        clearing = self.clearing()
        clear_at = clearing.trigger_tokens(usable) if clearing is not None else None
        if clear_at is not None and clear_at > usable:
            raise ValueError(
                f"ToolClearing.trigger={clear_at:,} tokens is above the usable window: {usable:,} "
                f"tokens (context window {window:,} - output reserve {reserve:,}), so old tool "
                f"results would never be cleared; set it below {usable:,}, or as a fraction "
                "of the usable window (e.g. trigger=0.6)"
            )
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
