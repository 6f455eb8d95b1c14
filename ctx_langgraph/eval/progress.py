"""Progress of long evaluation runs, on stderr: elapsed time, work done, an honest time left.

Work is counted in units that scale with what it costs (predicted milliseconds, see
:mod:`ctx_langgraph.eval.cost`), not in turns: one turn of a strategy that keeps the whole
history costs many turns of one that keeps a bounded state. The time left is the elapsed time
scaled by the work left over the work done, for each task and for the whole planned run.

On a terminal with `rich <https://rich.readthedocs.io>`_ installed, the run is a live display
(the whole run's bar, the running task's bar, elapsed time and time left, redrawn several times
a second). Anywhere else (a file, a pipe, a CI log) it writes plain lines, each starting with
the elapsed time: when a task or a step starts and ends, every :meth:`Progress.log` message,
and a status line (work done, time left, what is running) every ``interval`` seconds, so the
output is never silent for longer than that while the run lasts.

Examples:
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(stream=out, interval=None) as progress:
    ...     progress.plan({"26 · summary_tail": 20.0})
    ...     task = progress.task("26 · summary_tail", total=20.0)
    ...     progress.advance(task, 2.0, detail="turn 1/10")
    ...     progress.log("turn 12: compacted 38 messages")
    ...     progress.advance(task, 18.0, detail="turn 10/10")
    >>> print(out.getvalue(), end="")  # doctest: +ELLIPSIS
    [0:00] 26 · summary_tail: started
    [0:00] turn 12: compacted 38 messages
    [0:00] 26 · summary_tail: done in ...s
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import rich.progress

__all__ = ["INTERVAL", "Progress", "TaskId", "remaining_seconds"]

TaskId = int
"""What :meth:`Progress.task` returns, to pass to :meth:`Progress.advance`."""

INTERVAL = 3.0
"""Seconds between two plain status lines. On a loaded machine a line can come a second or so
late (the thread that writes it waits for the interpreter), so the output is still never
silent for 5 seconds."""

MIN_FRACTION = 0.02
"""The share of the work that must be done before a time left is shown."""

MIN_ELAPSED = 1.0
"""The seconds that must have passed before a time left is shown."""

Clock = Callable[[], float]


def remaining_seconds(elapsed: float, done: float, total: float) -> float | None:
    """The time left when ``done`` of ``total`` work units took ``elapsed`` seconds.

    ``None`` while too little is done to say (less than :data:`MIN_FRACTION` of the work or
    :data:`MIN_ELAPSED` seconds): an early rate is mostly start-up noise.

    Examples:
        >>> remaining_seconds(10.0, 25.0, 100.0)
        30.0
        >>> remaining_seconds(0.2, 1.0, 100.0) is None
        True
    """
    if total <= 0 or done >= total:
        return 0.0
    if done <= 0 or done < MIN_FRACTION * total or elapsed < MIN_ELAPSED:
        return None
    return elapsed * (total - done) / done


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _stamp(seconds: float) -> str:
    """``[m:ss]`` (``[h:mm:ss]`` past an hour): the elapsed time every plain line starts with."""
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"[{minutes}:{secs:02d}]"
    hours, minutes = divmod(minutes, 60)
    return f"[{hours}:{minutes:02d}:{secs:02d}]"


@dataclass
class _Task:
    description: str
    total: float | None
    started: float
    completed: float = 0.0
    detail: str = ""
    done: bool = False
    rich_id: rich.progress.TaskID | None = None

    def fraction(self) -> float | None:
        return min(self.completed / self.total, 1.0) if self.total else None


@dataclass
class _Plan:
    """The whole run: the work expected under each task's description, and when it began."""

    expected: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    started: float | None = None

    @property
    def total(self) -> float:
        return sum(self.expected.values())

    @property
    def completed(self) -> float:
        return sum(min(done, self.expected.get(key, done)) for key, done in self.done.items())


class Progress:
    """Progress on a terminal (live bars) or as plain lines elsewhere; a context manager.

    Args:
        enabled: ``False`` writes nothing at all (every method still works).
        stream: Where to write; ``sys.stderr`` by default.
        force_terminal: ``None`` draws live bars when ``stream`` is a terminal and rich is
            installed; ``True`` whenever rich is installed; ``False`` never.
        interval: Seconds between plain status lines (``None``: none, and no background
            thread; :meth:`tick` still writes one when it is due).
        clock: Monotonic seconds; tests pass a fake one.

    :meth:`plan` announces the work of the whole run (units under task descriptions), which
    gives the overall time left; :meth:`task` starts a task of ``total`` units and
    :meth:`advance` counts units done; :meth:`step` wraps a stretch of work of unknown length
    (loading, writing a report). Methods may be called from several threads.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        force_terminal: bool | None = None,
        interval: float | None = INTERVAL,
        clock: Clock = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.interval = interval
        self.clock = clock
        self.opened = clock()
        self._tasks: list[_Task] = []
        self._steps: list[_Task] = []
        self._plan = _Plan()
        self._lock = threading.RLock()
        self._last_status = self.opened
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._rich: rich.progress.Progress | None = None
        self._overall: rich.progress.TaskID | None = None
        if enabled and force_terminal is not False and (force_terminal or _isatty(self.stream)):
            self._rich = _rich_progress(self, self.stream, force_terminal)

    @property
    def live(self) -> bool:
        """Whether the run is drawn as live bars (else plain lines, or nothing when disabled)."""
        return self._rich is not None

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        elif self.enabled and self.interval is not None:
            self._ticker = threading.Thread(target=self._tick_forever, daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            for task in [*self._tasks, *self._steps]:
                if not task.done:
                    self._finish(task, stopped=True)
        if self._rich is not None:
            self._rich.stop()

    # ------------------------------------------------------------------ the whole run

    def plan(self, work: Mapping[str, float]) -> None:
        """Expect these tasks (description -> units) in the run; the first plan starts its clock.

        Planning a description again replaces what was expected of it, so a caller and the
        code it calls may both plan the same tasks.
        """
        with self._lock:
            if self._plan.started is None:
                self._plan.started = self.clock()
            self._plan.expected.update(work)
            if self._rich is not None:
                if self._overall is None:
                    self._overall = self._rich.add_task(
                        "all", total=None, detail="", whole_run=True
                    )
                self._rich.update(self._overall, total=self._plan.total)

    def estimate(self) -> tuple[float, float | None, float | None]:
        """``(elapsed, share done, time left)`` of the planned run (``None``: unknown yet)."""
        with self._lock:
            now = self.clock()
            total = self._plan.total
            if not total or self._plan.started is None:
                return now - self.opened, None, None
            done = self._plan.completed
            left = remaining_seconds(now - self._plan.started, done, total)
            return now - self.opened, min(done / total, 1.0), left

    # ------------------------------------------------------------------ tasks

    def task(self, description: str, total: float | None = None) -> TaskId:
        """Start a task of ``total`` units (``None``: unknown) and return its id."""
        with self._lock:
            self._tasks.append(self._start(description, total, total, f"{description}: started"))
            return len(self._tasks) - 1

    def _start(
        self, description: str, units: float | None, bar_total: float | None, line: str
    ) -> _Task:
        """A new task or step: counted in the planned run, shown as a bar or a line."""
        state = _Task(description, units, self.clock())
        if self._plan.started is not None and units is not None:
            self._plan.expected[description] = units
            self._plan.done[description] = 0.0
            self._update_overall()
        if self._rich is not None:
            state.rich_id = self._rich.add_task(description, total=bar_total, detail="")
        else:
            self._write(line)
        return state

    def advance(self, task: TaskId, amount: float = 1, *, detail: str | None = None) -> None:
        """Count ``amount`` more units of ``task``; it ends when it reaches its total.

        ``detail`` says where the task is in its own terms (``turn 80/150``).
        """
        with self._lock:
            state = self._tasks[task]
            if state.done:
                return
            state.completed += amount
            if detail is not None:
                state.detail = detail
            if state.description in self._plan.done:
                self._plan.done[state.description] = state.completed
                self._update_overall()
            if self._rich is not None and state.rich_id is not None:
                self._rich.update(state.rich_id, advance=amount, detail=state.detail)
            if state.total is not None and state.completed >= state.total:
                self._finish(state)

    def task_done(self, task: TaskId) -> None:
        """End ``task`` (if it has not reached its total already): all its work is done."""
        with self._lock:
            state = self._tasks[task]
            if not state.done:
                self._finish(state)

    @contextlib.contextmanager
    def step(self, description: str, units: float | None = None) -> Iterator[None]:
        """A stretch of work with no steps to count: shown, with its elapsed time, while it runs.

        ``units``: what it is expected to cost, counted in the planned run (all done when it
        ends), so the time left does not drop to nothing before it.
        """
        with self._lock:
            state = self._start(description, units, None, f"{description}...")
            self._steps.append(state)
        failed = True
        try:
            yield
            failed = False
        finally:
            with self._lock:
                if not state.done:
                    self._finish(state, stopped=failed)  # a step that raised is not done
                self._steps.remove(state)

    def log(self, message: str) -> None:
        """Write one line (above the bars in live mode)."""
        with self._lock:
            if self._rich is not None:
                self._rich.console.print(message, markup=False, highlight=False, soft_wrap=True)
            else:
                self._write(message)

    def echo(self, line: str, stream: TextIO) -> None:
        """Write one line of the run's own output to ``stream``.

        When live bars share the terminal ``stream`` writes to, the line goes above them
        (through the bars' console) instead of tearing them apart.
        """
        with self._lock:
            if self._rich is not None and _isatty(stream):
                self._rich.console.print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                stream.write(line + "\n")
                stream.flush()

    # ------------------------------------------------------------------ plain status lines

    def tick(self) -> None:
        """Write a status line if one is due (the background thread calls this)."""
        with self._lock:
            if self._rich is not None or not self.enabled or self.interval is None:
                return
            now = self.clock()
            if now - self._last_status >= self.interval:
                self._last_status = now
                self._write(self.status())

    def status(self) -> str:
        """One line: share of the run done, time left, and what is running now."""
        with self._lock:
            now = self.clock()
            parts: list[str] = []
            _, share, left = self.estimate()
            if share is not None:
                whole = f"{share:.0%} of the work done"
                whole += f", about {_duration(left)} left" if left is not None else ""
                parts.append(whole)
            running = [t for t in self._tasks if not t.done] + self._steps
            for task in running:
                what = f"{task.description}"
                if task.detail:
                    what += f" ({task.detail})"
                what += f", {_duration(now - task.started)} in"
                if share is None and task.total:
                    left = remaining_seconds(now - task.started, task.completed, task.total)
                    what += f", {task.fraction():.0%}" if task.fraction() is not None else ""
                    what += f", about {_duration(left)} left" if left is not None else ""
                parts.append(what)
            return "; ".join(parts) if parts else "working"

    def _tick_forever(self) -> None:
        period = min(0.25, (self.interval or 1.0) / 4)
        while not self._stop.wait(period):
            self.tick()

    # ------------------------------------------------------------------ internals

    def _update_overall(self) -> None:
        if self._rich is not None and self._overall is not None:
            self._rich.update(self._overall, total=self._plan.total, completed=self._plan.completed)

    def _finish(self, task: _Task, *, stopped: bool = False) -> None:
        task.done = True
        if task.total is not None and not stopped and task.description in self._plan.done:
            self._plan.done[task.description] = task.total  # ended early: its work is done
            self._update_overall()
        elapsed = _duration(self.clock() - task.started)
        if self._rich is not None and task.rich_id is not None:
            self._rich.update(task.rich_id, visible=stopped)  # a stopped bar shows where
            self._rich.stop_task(task.rich_id)
            verb = "stopped after" if stopped else "done in"
            self._rich.console.print(
                f"{task.description}: {verb} {elapsed}", markup=False, highlight=False
            )
        elif stopped:
            self._write(f"{task.description}: stopped after {elapsed}")
        else:
            self._write(f"{task.description}: done in {elapsed}")

    def _write(self, line: str) -> None:
        if self.enabled:
            now = self.clock()
            self.stream.write(f"{_stamp(now - self.opened)} {line}\n")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _rich_progress(
    owner: Progress, stream: TextIO, force_terminal: bool | None
) -> rich.progress.Progress | None:
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            ProgressColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress
        from rich.text import Text
    except ImportError:
        return None

    class TimeLeftColumn(ProgressColumn):
        """Time left from work units: the run's for its bar, a task's own for a task's."""

        def render(self, task: Any) -> Text:
            if task.total is None:
                return Text("")
            if task.fields.get("whole_run"):
                left = owner.estimate()[2]
            else:
                elapsed = task.elapsed or 0.0
                left = remaining_seconds(elapsed, task.completed, task.total)
            return Text("-:--:-- left" if left is None else f"{_duration(left)} left")

    console = Console(file=stream, force_terminal=force_terminal)
    return RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TimeLeftColumn(),
        console=console,
        redirect_stdout=False,
        redirect_stderr=False,
        refresh_per_second=4,
    )
