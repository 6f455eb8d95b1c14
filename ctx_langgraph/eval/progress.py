"""Progress of long evaluation runs on the terminal.

On a terminal with `rich <https://rich.readthedocs.io>`_ installed, each task is a live bar
(description, done/total, elapsed time, time left). Anywhere else (a file, a pipe, a CI log),
it writes plain lines: when a task starts, at every 10% of it, when it ends, and every
:meth:`Progress.log` message.

Example:
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(stream=out) as progress:
    ...     task = progress.task("26 · summary_tail", total=20)
    ...     progress.advance(task, 2)
    ...     progress.log("turn 12: compacted 38 messages")
    ...     progress.advance(task, 18)
    >>> print(out.getvalue(), end="")  # doctest: +ELLIPSIS
    26 · summary_tail: 0/20
    26 · summary_tail: 2/20 (10%), ... elapsed, ... left
    turn 12: compacted 38 messages
    26 · summary_tail: done, 20/20 in ...
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import rich.progress

__all__ = ["Progress", "TaskId"]

TaskId = int
"""What :meth:`Progress.task` returns, to pass to :meth:`Progress.advance`."""


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class _Task:
    description: str
    total: int | None
    started: float = field(default_factory=time.monotonic)
    completed: int = 0
    decile: int = 0
    done: bool = False
    rich_id: rich.progress.TaskID | None = None

    def counts(self) -> str:
        return f"{self.completed}/{self.total}" if self.total is not None else str(self.completed)


class Progress:
    """Progress bars on a terminal, plain lines elsewhere; a context manager.

    Args:
        enabled: ``False`` writes nothing at all (every method still works).
        stream: Where to write; ``sys.stderr`` by default.
        force_terminal: ``None`` uses live bars when ``stream`` is a terminal and rich is
            installed; ``True`` uses them whenever rich is installed; ``False`` never does.

    Tasks are numbered by :meth:`task`; :meth:`advance` moves one forward and a task ends when
    it reaches its total or at :meth:`task_done`. Tasks still open when the ``with`` block ends
    are reported as stopped. Methods may be called from several threads.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        force_terminal: bool | None = None,
    ) -> None:
        self.enabled = enabled
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self._tasks: list[_Task] = []
        self._lock = threading.Lock()
        self._rich: rich.progress.Progress | None = None
        if enabled and force_terminal is not False:
            terminal = force_terminal or _isatty(self.stream)
            if terminal:
                self._rich = _rich_progress(self.stream, force_terminal)

    @property
    def live(self) -> bool:
        """Whether tasks are drawn as rich bars (else plain lines, or nothing when disabled)."""
        return self._rich is not None

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._lock:
            for task in self._tasks:
                if not task.done:
                    self._finish(task, stopped=True)
        if self._rich is not None:
            self._rich.stop()

    def task(self, description: str, total: int | None = None) -> TaskId:
        """Start a task of ``total`` steps (``None``: unknown) and return its id."""
        with self._lock:
            task = _Task(description, total)
            self._tasks.append(task)
            if self._rich is not None:
                task.rich_id = self._rich.add_task(description, total=total)
            else:
                self._write(f"{description}: {task.counts()}")
            return len(self._tasks) - 1

    def advance(self, task: TaskId, amount: int = 1) -> None:
        """Count ``amount`` more steps of ``task``; it ends when it reaches its total."""
        with self._lock:
            state = self._tasks[task]
            if state.done:
                return
            state.completed += amount
            if self._rich is not None and state.rich_id is not None:
                self._rich.update(state.rich_id, advance=amount)
            if state.total is not None and state.completed >= state.total:
                self._finish(state)
                return
            if self._rich is None and state.total:
                decile = min(state.completed * 10 // state.total, 9)
                if decile > state.decile:
                    state.decile = decile
                    self._write(self._progress_line(state))

    def task_done(self, task: TaskId) -> None:
        """End ``task`` (if it has not reached its total already)."""
        with self._lock:
            state = self._tasks[task]
            if not state.done:
                self._finish(state)

    def log(self, message: str) -> None:
        """Write one line (above the bars in live mode)."""
        with self._lock:
            if self._rich is not None:
                self._rich.console.print(message, markup=False, highlight=False)
            else:
                self._write(message)

    def _progress_line(self, task: _Task) -> str:
        elapsed = time.monotonic() - task.started
        line = f"{task.description}: {task.counts()}"
        if task.total:
            line += f" ({task.completed * 100 // task.total}%)"
        line += f", {_duration(elapsed)} elapsed"
        if task.total and task.completed > 0:
            remaining = elapsed * (task.total - task.completed) / task.completed
            line += f", {_duration(max(remaining, 0.0))} left"
        return line

    def _finish(self, task: _Task, *, stopped: bool = False) -> None:
        task.done = True
        elapsed = _duration(time.monotonic() - task.started)
        if self._rich is not None and task.rich_id is not None:
            if task.total is None:
                self._rich.update(task.rich_id, total=task.completed)
            self._rich.stop_task(task.rich_id)
        elif stopped:
            self._write(f"{task.description}: stopped at {task.counts()} after {elapsed}")
        else:
            self._write(f"{task.description}: done, {task.counts()} in {elapsed}")

    def _write(self, line: str) -> None:
        if self.enabled:
            self.stream.write(line + "\n")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _rich_progress(stream: TextIO, force_terminal: bool | None) -> rich.progress.Progress | None:
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress
    except ImportError:
        return None
    console = Console(file=stream, force_terminal=force_terminal)
    return RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
