"""Artifacts in events: the files, URLs, ids and commands a span's messages touch or name
(docs/design.md §6, *Artifact trail*).

A tool call touches what its arguments name (``created``, ``changed`` or ``read``, from the
tool's name or a shell command's verb; ``failed`` on an error result), with its result as the
state; a short result and what people say name artifacts too (``mentioned``).

Examples:
    >>> import datetime as dt
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict
    >>> from ctx_langgraph.history.types import HistoryEvent
    >>> def event(seq, message):
    ...     return HistoryEvent(seq, f"m{seq}", "main", message.type, None,
    ...         message_to_dict(message), message.text, (), (), 1, True,
    ...         dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc))
    >>> call = {"name": "read_file", "args": {"path": "/etc/app.yaml"}, "id": "c1"}
    >>> events = [event(1, HumanMessage("The backup goes to /mnt/b/app.tar.")),
    ...           event(2, AIMessage("", tool_calls=[call])),
    ...           event(3, ToolMessage("port: 8080", tool_call_id="c1"))]
    >>> for touch in span_touches(events):
    ...     print(touch.seq, touch.kind, touch.artifact, touch.action, touch.via, repr(touch.state))
    1 path /mnt/b/app.tar mentioned user 'The backup goes to /mnt/b/app.tar.'
    3 path /etc/app.yaml read read_file 'port: 8080'
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.history.types import HistoryEvent
from ctx_langgraph.view.markers import is_lookup_result

__all__ = [
    "LISTING_ARTIFACTS",
    "SHORT_MESSAGE_CHARS",
    "SHORT_STATE_CHARS",
    "Action",
    "ArtifactKind",
    "Touch",
    "find_artifacts",
    "span_touches",
]

ArtifactKind = Literal["path", "url", "id", "command"]
Action = Literal["created", "read", "changed", "failed", "mentioned"]

SHORT_STATE_CHARS: Final = 200
"""A tool result up to this long is a state whole (else the line naming the artifact)."""
SHORT_MESSAGE_CHARS: Final = 300
"""A message up to this long is a state whole (else the sentence naming the artifact)."""
LINE_CHARS: Final = 200
LISTING_ARTIFACTS: Final = 8
"""A result naming more artifacts than this is a listing: they are its data, not a trail."""
COMMAND_CHARS: Final = 120

_URL = re.compile(r"\b(?:https?|ftp|s3|gs)://[^\s<>\"'`)\]]+")
_PATHS: Final = (
    re.compile(r"\b[A-Za-z]:\\[^\s\"'<>|*?,;]+"),
    re.compile(r"(?<![\w.:/~-])~?/(?:[\w.@+-]+/)+[\w.@+-]+|(?<![\w.:/~-])/[\w-]+\.[A-Za-z]\w*"),
    re.compile(r"(?<![\w./@:-])(?:[\w.-]+/)+[\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}\b"),
)
_SYSTEM_PATHS: Final = ("/dev/", "/proc/", "/sys/", "/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/")
_ID = re.compile(r"[A-Z]{2,}[A-Z0-9]*(?:-[A-Z0-9]+)*-\d+(?:-[A-Z0-9]+)*|#\d+")
_ID_KEY = re.compile(r"(?:^|_)ids?$", re.I)
_COMMAND_KEYS: Final = frozenset({"command", "cmd", "script", "shell", "bash"})
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_ERROR = re.compile(r"^\s*(?:error|traceback|fatal|exception)\b", re.I)
_WORD = re.compile(r"[a-z]+")
_NAMED = re.compile(r"[^\W_]")

_CREATES: Final = frozenset({"create", "new", "touch", "mkdir", "init", "generate", "scaffold"})
_CHANGES: Final = frozenset(
    {
        "write", "edit", "update", "patch", "replace", "delete", "remove", "rm", "rmdir",
        "move", "mv", "rename", "append", "insert", "save", "put", "upload", "apply", "modify",
        "cp", "copy", "chmod", "chown", "truncate", "tee", "ln", "install", "set", "undo",
    }
)  # fmt: skip
_SUBCOMMANDS: Final = _CREATES | _CHANGES | {"view", "read", "get", "list", "show", "open"}
"""An editor tool's ``command`` argument (``create``, ``view``): a verb, not a shell command."""


@dataclass(frozen=True)
class Touch:
    """One sighting of an artifact: at which seq, what was done to it, by whom (the tool's
    name, ``user`` or ``assistant``), and its state there (verbatim; None: nothing said)."""

    artifact: str
    kind: ArtifactKind
    seq: int
    action: Action
    via: str
    state: str | None


def _clean_path(found: str) -> str:
    return found.rstrip(".,;:!?)'\"`")


def find_artifacts(text: str) -> list[tuple[ArtifactKind, str]]:
    """The URLs and paths ``text`` names, in order of first appearance, each once.

    Examples:
        >>> find_artifacts("see https://x.io/a/b and /srv/app/config.yaml; not 3/4 or 150/min.")
        [('url', 'https://x.io/a/b'), ('path', '/srv/app/config.yaml')]
    """
    found: dict[tuple[ArtifactKind, str], int] = {}
    masked = text
    for match in _URL.finditer(text):
        found.setdefault(("url", _clean_path(match.group())), match.start())
        masked = masked[: match.start()] + " " * len(match.group()) + masked[match.end() :]
    for pattern in _PATHS:
        for match in pattern.finditer(masked):
            path = _clean_path(match.group())
            if len(path) > 2 and not path.startswith(_SYSTEM_PATHS):
                found.setdefault(("path", path), match.start())
        masked = pattern.sub(lambda m: " " * len(m.group()), masked)
    return [key for key, _ in sorted(found.items(), key=lambda item: item[1])]


def _excerpt(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1].rstrip() + "…"


def _state(text: str, artifact: str, *, prose: bool, first_line: bool = False) -> str | None:
    """The whole text when short, else the line (sentence, in prose) naming ``artifact``."""
    stripped = text.strip()
    if not stripped:
        return None
    if len(stripped) <= (SHORT_MESSAGE_CHARS if prose else SHORT_STATE_CHARS):
        return stripped
    for line in stripped.splitlines():
        parts = _SENTENCE.split(line) if prose else [line]
        for part in parts:
            if artifact in part:  # a line saying nothing but the name is no state
                return _excerpt(part.strip()) if _NAMED.search(part.replace(artifact, "")) else None
    return _excerpt(stripped.splitlines()[0].strip()) if first_line else None


def _words(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)
    return set(_WORD.findall(spaced.lower()))


def _verb_action(words: set[str]) -> Action:
    if words & _CREATES:
        return "created"
    if words & _CHANGES:
        return "changed"
    return "read"


def _command_action(command: str) -> tuple[Action, set[str]]:
    """What a shell command does, and the paths it writes to by redirection."""
    try:
        tokens = shlex.split(command, comments=False)
    except ValueError:
        tokens = command.split()
    written = {tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t in (">", ">>")}
    written |= {t.lstrip(">") for t in tokens if t.startswith(">") and len(t.lstrip(">")) > 1}
    verbs = [t for t in tokens if t not in ("sudo", "env") and "=" not in t][:1]
    verb = verbs[0].rsplit("/", 1)[-1] if verbs else ""
    if verb == "sed" and any(t.startswith("-i") for t in tokens):
        return "changed", written
    return _verb_action({verb}) if verb in _CREATES | _CHANGES else "read", written


@dataclass(frozen=True)
class _Call:
    name: str
    seq: int
    touched: tuple[tuple[ArtifactKind, str, Action], ...]


def _strings(value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                yield str(key), item
            else:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _is_subcommand(key: str, value: str) -> bool:
    return (
        key.lower() in _COMMAND_KEYS
        and " " not in value.strip()
        and bool(_words(value) & _SUBCOMMANDS)
    )


def _call_touches(name: str, args: Any) -> tuple[tuple[ArtifactKind, str, Action], ...]:
    strings = list(_strings(args))
    action = _verb_action(_words(name))
    for key, value in strings:
        if _is_subcommand(key, value):
            action = _verb_action(_words(value))
    touched: dict[tuple[ArtifactKind, str], Action] = {}
    commands: list[str] = []
    for key, value in strings:
        if _is_subcommand(key, value):
            continue
        if key.lower() in _COMMAND_KEYS and value.strip():
            commands.append(value.strip())
            verb, written = _command_action(value)
            for kind, artifact in find_artifacts(value):
                touched.setdefault((kind, artifact), "changed" if artifact in written else verb)
            continue
        for kind, artifact in find_artifacts(value):
            touched.setdefault((kind, artifact), action)
        is_id = _ID.fullmatch(value.strip()) or (_ID_KEY.search(key) and 3 <= len(value) <= 64)
        if is_id and action != "read":  # an id looked up is a key fact, not a trail
            touched.setdefault(("id", value.strip()), action)
    for command in commands:
        if not touched:  # a command naming nothing else is the artifact itself
            text = command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS] + "…"
            touched[("command", text)] = _command_action(command)[0]
    return tuple((kind, artifact, how) for (kind, artifact), how in touched.items())


def _message(event: HistoryEvent) -> BaseMessage | None:
    try:
        return event.message
    except Exception:  # a record this version cannot rebuild
        return None


def _text(message: BaseMessage | None, event: HistoryEvent) -> str:
    if message is None:
        return event.text
    if isinstance(message.content, str):
        return message.content
    return message.text or event.text


def _result_touches(
    event: HistoryEvent, message: BaseMessage | None, call: _Call | None
) -> Iterator[Touch]:
    text = _text(message, event)
    name = call.name if call else (event.name or next(iter(event.tool_names), "tool"))
    error = getattr(message, "status", "success") == "error" or bool(_ERROR.match(text))
    own = {(kind, artifact) for kind, artifact, _ in call.touched} if call else set()
    for kind, artifact, action in call.touched if call else ():
        state = _state(text, artifact, prose=False, first_line=True)
        yield Touch(artifact, kind, event.seq, "failed" if error else action, name, state)
    if error or len(text.strip()) > SHORT_STATE_CHARS:
        return
    named = [key for key in find_artifacts(text) if key not in own]
    if len(named) + len(own) > LISTING_ARTIFACTS:
        return
    for kind, artifact in named:
        state = _state(text, artifact, prose=False)
        yield Touch(artifact, kind, event.seq, "mentioned", name, state)


def span_touches(events: Iterable[HistoryEvent]) -> list[Touch]:
    """Every touch of an artifact in ``events`` (a span, in seq order), in seq order: a call's
    artifacts at its result's seq (at its own, without a state, when the result is not in the
    span). History lookup pages are skipped.
    """
    touches: list[Touch] = []
    pending: dict[str, _Call] = {}
    for event in events:
        message = _message(event)
        if message is not None and is_lookup_result(message):
            continue
        if event.role in ("tool", "function") or isinstance(message, ToolMessage):
            call_id = next(iter(event.tool_call_ids), None) or getattr(
                message, "tool_call_id", None
            )
            call = pending.pop(call_id, None) if call_id else None
            touches.extend(_result_touches(event, message, call))
            continue
        if isinstance(message, AIMessage):
            for tool_call in message.tool_calls:
                touched = _call_touches(tool_call["name"], tool_call.get("args") or {})
                pending[str(tool_call.get("id"))] = _Call(tool_call["name"], event.seq, touched)
        speaker = "user" if event.role in ("human", "user") else event.role
        if speaker in ("user", "ai", "assistant"):
            who = "user" if speaker == "user" else "assistant"
            said = _text(message, event)
            touches.extend(
                Touch(
                    artifact, kind, event.seq, "mentioned", who, _state(said, artifact, prose=True)
                )
                for kind, artifact in find_artifacts(said)
            )
    for call in pending.values():
        touches.extend(
            Touch(artifact, kind, call.seq, action, call.name, None)
            for kind, artifact, action in call.touched
        )
    touches.sort(key=lambda touch: touch.seq)
    return touches
