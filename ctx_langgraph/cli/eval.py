"""``ctx-langgraph eval``: the harness on the command line.

Arguments are checked before any work starts (see :mod:`ctx_langgraph.cli.args`): a bad
value, file or dataset is a :class:`~ctx_langgraph.cli.args.UsageError` or a
:class:`~ctx_langgraph.errors.DatasetError`, which ``ctx_langgraph.cli.main`` prints as one
line with exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph.cli.args import (
    MIN_WINDOW,
    UsageError,
    int_between,
    one_line,
    output_dir,
    positive_int,
    seed_list,
    strategies,
    window,
)
from ctx_langgraph.datasets import Conversation, load_locomo
from ctx_langgraph.errors import DatasetError
from ctx_langgraph.eval.report import write_outputs
from ctx_langgraph.eval.synthetic import MAX_TURNS
from ctx_langgraph.lookup import DEFAULT_MAX_TOKENS, MIN_MAX_TOKENS

__all__ = ["add_eval_parser", "conversation_seeds", "load_dataset", "run_eval_command"]

FORMATS = ("locomo", "trace", "synthetic")


def _files(path: Path, suffix: str) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix == suffix and p.is_file())
        if not found:
            kinds = {".json": "LoCoMo *.json", ".jsonl": "trace *.jsonl"}
            raise DatasetError(
                f"{path}: no {kinds.get(suffix, '*' + suffix)} file in this directory"
            )
        return found
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory")
    return [path]


def _guess_format(path: Path) -> str:
    if path.is_dir():
        return "trace" if any(p.suffix == ".jsonl" for p in path.iterdir()) else "locomo"
    return "trace" if path.suffix == ".jsonl" else "locomo"


def load_dataset(
    dataset: str | None,
    data_format: str | None,
    *,
    seed: int,
    sessions: int,
    turns: int,
    seeds: Sequence[int] | None = None,
) -> tuple[list[Conversation], str, list[dict[str, Any]]]:
    """The conversations to replay, the format, and the tool schemas their tools get.

    Generated sessions come from ``seed`` (sessions ``seed``, ``seed + 1``, ...), or with
    ``seeds`` one dataset per seed (:func:`~ctx_langgraph.eval.seeds.session_seeds`), in seed
    order; :func:`conversation_seeds` says which seed each one belongs to."""
    from ctx_langgraph.eval.seeds import session_seeds
    from ctx_langgraph.eval.synthetic import tool_session, tool_specs
    from ctx_langgraph.eval.trace import save_trace

    if data_format == "synthetic":
        plan = session_seeds(list(seeds) if seeds else [seed], sessions)
        generated = [
            tool_session(session, turns=turns) for group in plan.values() for session in group
        ]
        if dataset:  # keep them, to replay later with --format trace
            Path(dataset).mkdir(parents=True, exist_ok=True)
            for conversation in generated:
                save_trace(conversation, Path(dataset) / f"{conversation.name}.jsonl")
        return generated, "synthetic", tool_specs()
    return _load_files(dataset, data_format)


def conversation_seeds(seeds: Sequence[int] | None, seed: int, sessions: int) -> list[int]:
    """The seed each generated conversation of :func:`load_dataset` belongs to, in order."""
    chosen = list(seeds) if seeds else [seed]
    return [its_seed for its_seed in chosen for _ in range(sessions)]


def _load_files(
    dataset: str | None, data_format: str | None
) -> tuple[list[Conversation], str, list[dict[str, Any]]]:
    """LoCoMo files or JSONL traces (a file, or a directory of them)."""
    from ctx_langgraph.eval.synthetic import tool_specs
    from ctx_langgraph.eval.trace import load_trace

    if not dataset:
        raise DatasetError("--dataset is required unless --format synthetic")
    path = Path(dataset)
    listed = path.iterdir() if path.is_dir() and not data_format else None
    if listed is not None and not any(p.suffix in (".json", ".jsonl") for p in listed):
        raise DatasetError(f"{path}: no LoCoMo *.json or trace *.jsonl file in this directory")
    chosen = data_format or _guess_format(path)
    try:
        if chosen == "locomo":
            return [load_locomo(p) for p in _files(path, ".json")], "locomo", []
        return [load_trace(p) for p in _files(path, ".jsonl")], "trace", tool_specs()
    except DatasetError as exc:
        if data_format or path.is_dir() or not path.exists():
            raise
        other = "trace" if chosen == "locomo" else "locomo"
        raise DatasetError(
            f"{exc} (read as {chosen} because of the name; pass --format {other} if it is one)"
        ) from exc


_AUTO_MODELS = (
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-3-5-haiku-latest"),
)


def _model(spec: str | None, option: str = "--reader") -> Any:
    """``None`` (offline), or a chat model: ``auto`` picks one whose API key is set."""
    if spec in (None, "", "offline", "scripted", "extractive"):
        return None
    if spec == "auto":
        spec = next((model for key, model in _AUTO_MODELS if os.environ.get(key)), None)
        if spec is None:
            return None
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec, temperature=0)
    except Exception as exc:  # the spec names no model we can make: unknown, uninstalled, no key
        raise UsageError(
            f"{option} {spec!r}: cannot make this chat model ({type(exc).__name__}: "
            f"{one_line(exc)}); use offline, auto, or provider:model such as openai:gpt-4o-mini"
        ) from None


def _progress(quiet: bool, stream: TextIO) -> Any:
    from ctx_langgraph.eval.progress import Progress

    return Progress(enabled=not quiet, stream=stream)


def _seeds(args: argparse.Namespace) -> list[int] | None:
    """``--seeds`` checked against the data: several seeds need generated sessions."""
    seeds: list[int] | None = args.seeds
    if seeds and len(seeds) > 1 and args.format != "synthetic":
        raise UsageError(
            f"--seeds {','.join(map(str, seeds))}: several seeds need generated sessions "
            "(--format synthetic); LoCoMo files and traces are fixed data, so every seed would "
            "replay the same conversations. Drop --seeds (the report then shows n=1)"
        )
    return seeds


def _dataset_label(args: argparse.Namespace, seeds: Sequence[int] | None) -> str:
    if args.dataset:
        return str(args.dataset)
    chosen = list(seeds) if seeds else [args.seed]
    noun = "seed" if len(chosen) == 1 else "seeds"
    return f"synthetic ({noun} {', '.join(map(str, chosen))})"


def run_eval_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Check the models and the dataset, then run every strategy and write the report.

    Raises:
        UsageError: ``--reader`` or ``--summarizer`` names no chat model we can make, the
            ``--dataset`` of generated sessions is not a directory, or several ``--seeds``
            are given for data that is not generated.
        DatasetError: the dataset is missing, malformed or empty.
    """
    out = out or sys.stdout
    from ctx_langgraph.eval.cost import REPORT_STEP, report_cost

    seeds = _seeds(args)
    reader = _model(args.reader, "--reader")
    summary_model = _model(args.summarizer, "--summarizer")
    if args.format == "synthetic" and args.dataset:
        try:
            output_dir(args.dataset)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--dataset (where generated sessions go): {exc}") from None
    # (read first, without progress lines: a bad dataset is one line of error)
    conversations, data_format, specs = load_dataset(
        args.dataset,
        args.format,
        seed=args.seed,
        sessions=args.sessions,
        turns=args.turns,
        seeds=seeds,
    )
    generated = data_format == "synthetic"
    with _progress(args.quiet, sys.stderr) as progress:
        with progress.step("loading the strategies"):
            from ctx_langgraph.eval.harness import run_eval
            from ctx_langgraph.eval.report import category_table, plan_summary, summary_table

        report = report_cost(len(conversations), len(args.strategies))
        progress.plan({REPORT_STEP: report})
        metrics, series = run_eval(
            conversations,
            args.strategies,
            window=args.window,
            dataset=_dataset_label(args, seeds),
            data_format=data_format,
            seed=seeds[0] if seeds else args.seed,
            seeds=conversation_seeds(seeds, args.seed, args.sessions) if generated else None,
            retrieval_tokens=args.retrieval_tokens,
            reader=reader,
            summary_model=summary_model,
            tool_specs=specs,
            log=progress.log,
            progress=progress,
        )
        with progress.step(REPORT_STEP, units=report):
            written = write_outputs(metrics, series, Path(args.out))
    print(summary_table(metrics), file=out)
    print("\n" + plan_summary(metrics), file=out)
    print("\n" + category_table(metrics), file=out)
    print(f"\nwrote {', '.join(str(p) for p in written)}", file=out)
    return 0


_EVAL_DESCRIPTION = f"""\
Replay long conversations through every context strategy under comparison (sending
everything, LangChain's trim_messages, langmem, LangChain's SummarizationMiddleware, and
ours: summary only, summary + recent tail, summary + tail + history lookup), each a real
LangGraph agent around the same replayed model, then ask the conversations' questions at
the end.

The data: LoCoMo conversation files (*.json), JSONL traces (*.jsonl), a directory of
either, or sessions generated here (--format synthetic). Writes metrics.json, series.json,
report.md and plots (PNG) into --out, and prints the summary tables.

Offline by default: the replayed model, the extractive summarizer and the scripted reader
make no network call. Only --reader or --summarizer naming a chat model (or auto, when
OPENAI_API_KEY or ANTHROPIC_API_KEY is set) calls a provider.

The smallest --window is {MIN_WINDOW:,} tokens; a conversation whose largest turn plus the
tool schemas do not fit the usable window stops with an error naming --window."""

_EVAL_EXAMPLES = """\
examples:
  ctx-langgraph eval --format synthetic --sessions 3 --turns 300 --out eval-synthetic
  ctx-langgraph eval --format synthetic --sessions 2 --turns 200 --seeds 0,1,2
  ctx-langgraph eval --dataset locomo/ --strategies summary_tail_lookup,langchain
  ctx-langgraph eval --dataset my-trace.jsonl --window 8192 --reader offline --quiet"""


def add_eval_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="replay LoCoMo files, JSONL traces or generated sessions through every context "
        "strategy; write metrics, a report and plots",
        description=_EVAL_DESCRIPTION,
        epilog=_EVAL_EXAMPLES,
    )
    parser.add_argument(
        "--dataset",
        metavar="PATH",
        help="a LoCoMo JSON file, a JSONL trace, or a directory of them; with --format "
        "synthetic, a directory to save the generated sessions in (default: not saved)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="the dataset's format (default: trace for *.jsonl, else locomo)",
    )
    parser.add_argument(
        "--strategies",
        type=strategies,
        default="all",
        metavar="NAMES",
        help="comma-separated strategy names, or all",
    )
    parser.add_argument(
        "--window", type=window, default=4096, metavar="TOKENS", help="context window in tokens"
    )
    parser.add_argument(
        "--out", type=output_dir, default="eval-out", metavar="DIR", help="output directory"
    )
    seeding = parser.add_mutually_exclusive_group()
    seeding.add_argument("--seed", type=int, default=0, help="seed of generated sessions")
    seeding.add_argument(
        "--seeds",
        type=seed_list,
        default=None,
        metavar="LIST",
        help="run the whole evaluation once per seed (comma-separated, e.g. 0,1,2), one "
        "generated dataset per seed with no session shared, and report each figure's mean, "
        "min-max and standard deviation across seeds; generated sessions only (LoCoMo and "
        "traces are fixed: one seed, n=1); default: --seed alone",
    )
    parser.add_argument(
        "--sessions", type=positive_int, default=3, help="generated sessions (synthetic)"
    )
    parser.add_argument(
        "--turns",
        type=int_between(1, MAX_TURNS),
        default=300,
        help="turns per generated session (synthetic)",
    )
    parser.add_argument(
        "--retrieval-tokens",
        type=int_between(MIN_MAX_TOKENS, what="tokens of one lookup page"),
        default=DEFAULT_MAX_TOKENS,
        metavar="TOKENS",
        help="the history lookup's page cap",
    )
    parser.add_argument(
        "--reader",
        default="auto",
        metavar="MODEL",
        help="who answers the questions: auto (a real model when OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY is set, else the offline scripted reader), offline, or an "
        "init_chat_model spec such as openai:gpt-4o-mini",
    )
    parser.add_argument(
        "--summarizer",
        default="extractive",
        metavar="MODEL",
        help="who summarizes, for every strategy alike: extractive (offline), auto, "
        "or an init_chat_model spec",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    parser.set_defaults(run=run_eval_command)
