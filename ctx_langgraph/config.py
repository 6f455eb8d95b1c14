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


def _tokens(amount: Amount, of: int) -> int:
    """``amount`` (checked already) in tokens of ``of``."""
    return math.floor(amount * of) if isinstance(amount, float) else int(amount)


def _check_below(
    lower_name: str, lower: Amount | None, upper_name: str, upper: Amount, why: str
) -> None:
    """``lower`` below ``upper`` when both are fractions or both tokens."""
    if lower is None or is_count(lower) != is_count(upper) or lower < upper:
        return
    raise ValueError(
        f"ContextConfig.{lower_name}={lower!r} must be below {upper_name}={upper!r}: {why}"
    )


_LATER_CHECKS: tuple[tuple[str, int | None, bool], ...] = (
    ("tool_output_cap_tokens", 64, True),
    ("clear_tool_results_keep", 0, True),
    ("clear_tool_results_batch", 1, False),
    ("summary_max_tokens", 64, False),
    ("artifact_trail_tokens", 64, True),
    ("compaction_attempts", 1, False),
    ("max_compaction_rounds", 1, False),
    ("compaction_timeout_s", None, False),
    ("compaction_backoff_s", None, False),
    ("summary_versions_keep", 0, True),
    ("segment_events", 4, True),
    ("segment_gap_s", None, True),
)
"""``(field, least count or None for seconds, optional)``, checked in this order."""


def _check_types(config: ContextConfig) -> None:
    """Every field of ``config`` of its type and in its range, named when it is not."""
    check_count("ContextConfig", "context_window", config.context_window, 1, optional=True)
    check_count("ContextConfig", "output_reserve", config.output_reserve, 0, optional=True)
    for name in ("trigger", "target", "safety_margin", "precompact_at"):
        if name != "precompact_at" or config.precompact_at is not None:
            check_amount("ContextConfig", name, getattr(config, name), zero=name == "safety_margin")
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
    for name, minimum, optional in _LATER_CHECKS:
        value = getattr(config, name)
        if minimum is not None:
            check_count("ContextConfig", name, value, minimum, optional=optional)
        else:
            zero = name == "compaction_backoff_s"
            check_seconds("ContextConfig", name, value, zero=zero, optional=optional)


def _check_caps(config: ContextConfig, window: int, usable: int) -> None:
    """A cap (``summary_max_tokens``, ``tool_output_cap_tokens``) set, not left at its default,
    above the usable window is a mistake: say which."""
    defaults = {f.name: f.default for f in fields(config)}
    for name in ("summary_max_tokens", "tool_output_cap_tokens"):
        value = getattr(config, name)
        if value is not None and value != defaults[name] and value > usable:
            raise ValueError(
                f"ContextConfig.{name}={value:,} is larger than the usable window: {usable:,} "
                f"tokens (context window {window:,} - output reserve {window - usable:,}); set "
                f"it below {usable:,}, or use a model with a larger window"
            )


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
    with their names. A cleared result becomes a placeholder in the state; the original stays in
    the history store, for ``history_lookup`` to read by the handle the placeholder names. The
    results the model has not read yet are never cleared.

    Args:
        keep: the most recent tool results kept whole, of any tool. Default 3.
        trigger: clear only when the next request's estimate is above this: tokens (int), or a
            fraction of the usable window (float in (0, 1]). None: whenever a result is past
            ``keep``.
        clear_at_least: the tokens a clearing must reclaim: when the due results reclaim less,
            none is cleared; else the oldest until this much. 0: every due result at once.
        batch: clear only once at least this many results are due, then all together. Default 1.
        exclude_tools: names of the tools whose results are never cleared.
        clear_lookup_results: clear the history lookup tool's pages too. Default False.
        clear_tool_inputs: also replace each cleared result's call arguments with ``{}`` (the
            call and its id stay). Default False.
        placeholder: the text of a cleared result, with ``{tool}``, ``{handle}``, ``{seq}`` and
            ``{tokens}`` filled in. None: a sentence that says how to read it again.

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
        return None if self.trigger is None else _tokens(self.trigger, usable)

    def placeholder_text(self, *, tool: str, handle: str, seq: int | None, tokens: int) -> str:
        """The configured placeholder with its fields filled in (None: the caller's default)."""
        assert self.placeholder is not None
        text = self.placeholder
        seen = "" if seq is None else str(seq)
        for name, value in (("tool", tool), ("handle", handle), ("seq", seen)):
            text = text.replace("{" + name + "}", value)  # not str.format: other braces stay
        return text.replace("{tokens}", f"{tokens:,}")


@dataclass(frozen=True)
class ContextConfig:
    """How much context a thread may use, and when to compact.

    Args:
        context_window: the model's input window in tokens; None takes it from the chat model's
            profile (``model.profile["max_input_tokens"]``).
        output_reserve: tokens kept free for the reply. None: a quarter of the window, at most
            16,384.
        trigger: compaction starts when the estimate is above this (tokens, or a fraction of
            the usable window = window - reserve).
        target: compaction brings the estimate below this (< trigger).
        keep_recent_tokens: the least recent tail kept verbatim by compaction (at most half the
            target).
        tail_fills_target: compaction keeps every recent message that fits under the target
            beside the fixed part and a summary at its cap; False keeps exactly
            ``keep_recent_tokens``.
        safety_margin: added to every estimate (tokens, or a fraction of the estimate).
        tool_output_cap_tokens: a tool result above this (or a quarter of the usable window) is
            capped on entry to a head/tail preview and a handle (the original stays in the
            store). None: no cap on a result alone.
        clear_tool_results_keep: keep only the last K tool results verbatim, older ones become
            placeholders. None: never. The same as ``tool_clearing=ToolClearing(keep=K)``.
        clear_tool_results_batch: clear only once this many results are due, all at once, so
            the cacheable prefix moves less often. Default 4.
        tool_clearing: clearing old tool results with every option (:class:`ToolClearing`),
            instead of the two fields above.
        summary_max_tokens: the summary's cap (its real token length is checked before commit).
        artifact_trail_tokens: the cap of the artifact trail each summary carries (files, URLs,
            ids and commands the thread touched; docs/design.md §6). None: no trail.
        artifact_trail_room: ``"beside"`` the summary's prose, or ``"inside"`` its cap (up to
            half). None: ``inside`` when the history lookup tool is wired, else ``beside``.
        compaction_attempts: summarizer attempts before a compaction fails cleanly.
        max_compaction_rounds: how many times one request may go ``ctx_budget`` ->
            ``ctx_compact``; a round without progress is the last. Then the request goes on
            when it fits the usable window, else the extractive summarizer cuts deeper, and
            :class:`~ctx_langgraph.errors.ContextBudgetExceeded` only when nothing fits.
        compaction_timeout_s: time budget of all attempts of one compaction together.
        compaction_backoff_s: the wait after a failed compaction, doubling with each failure in
            a row; a request that would not fit the window does not wait (the extractive
            summarizer covers it).
        precompact_at: above this (below ``trigger``) a summary candidate is built in the
            background, for a later turn over the trigger to commit. None: off.
        segment_events: after a compaction, the covered history is summarized in ranges of
            this many events, for the history lookup to search (never loaded into a prompt).
            None: no segment index.
        segment_gap_s: a pause longer than this (seconds) closes a segment early; None: by
            count only.
        summary_versions_keep: superseded or failed summary versions kept per branch after each
            commit; None keeps every version.
        compaction_backend: ``"local"`` (our summarizers only) or a provider adapter
            (:class:`~ctx_langgraph.providers.OpenAIResponsesCompaction`) whose opaque window is
            sent instead of the summary while the thread stays on that provider.
        timestamp: when a message was said (``message -> datetime | None``). None: the
            message's own ``created_at``/``timestamp`` metadata, else the time before it, else
            now (docs/design.md §4).

    Raises:
        TypeError: a field of the wrong type; the message names the field, the value and what
            is expected.
        ValueError: a value out of its range, ``target`` or ``precompact_at`` not below
            ``trigger``, and, once the window is known: a combination that leaves no room, or
            a cap set above the usable window. The same checks run on
            :func:`dataclasses.replace`.

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
            self.resolve()

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
        return min(16_384, window // 4)

    def summary_cap(self, target: int) -> int:
        """A summary's token cap: ``summary_max_tokens``, at most half ``target`` (at least 64).

        Examples:
            >>> ContextConfig().summary_cap(100_000), ContextConfig().summary_cap(1_000)
            (2000, 500)
        """
        return min(self.summary_max_tokens, max(64, target // 2))

    def artifact_trail_cap(self, summary_cap: int) -> int:
        """The artifact trail's token cap: ``artifact_trail_tokens``, at most ``summary_cap``
        beside the summary, at most half of it inside; 0 without a trail.

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
        """This configuration with an unset ``artifact_trail_room`` decided: ``inside`` with
        the history lookup tool (``lookup``), else ``beside``.

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
        trigger = _tokens(self.trigger, usable)
        target = _tokens(self.target, usable)
        if trigger > usable:
            raise ValueError(
                f"trigger {trigger} is above the usable window {usable} (window - output_reserve)"
            )
        if target >= trigger:
            raise ValueError(f"target ({target} tokens) must be below trigger ({trigger} tokens)")
        precompact = None if self.precompact_at is None else _tokens(self.precompact_at, usable)
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
            min(self.keep_recent_tokens, target // 2),
            precompact,
        )
