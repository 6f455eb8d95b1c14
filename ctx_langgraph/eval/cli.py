"""``ctx-langgraph eval`` and ``ctx-langgraph demo``: the harness on the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph.datasets import Conversation, load_locomo
from ctx_langgraph.errors import DatasetError

__all__ = ["add_demo_parser", "add_eval_parser"]

FORMATS = ("locomo", "trace", "synthetic")


def _files(path: Path, suffix: str) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix == suffix)
        if not found:
            raise DatasetError(f"{path}: no *{suffix} file in this directory")
        return found
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory")
    return [path]


def _guess_format(path: Path) -> str:
    if path.is_dir():
        return "trace" if any(p.suffix == ".jsonl" for p in path.iterdir()) else "locomo"
    return "trace" if path.suffix == ".jsonl" else "locomo"


def load_dataset(
    dataset: str | None, data_format: str | None, *, seed: int, sessions: int, turns: int
) -> tuple[list[Conversation], str, list[dict[str, Any]]]:
    """The conversations to replay, the format, and the tool schemas their tools get."""
    from ctx_langgraph.eval.synthetic import tool_session, tool_specs
    from ctx_langgraph.eval.trace import load_trace, save_trace

    if data_format == "synthetic":
        generated = [tool_session(seed + n, turns=turns) for n in range(sessions)]
        if dataset:  # keep them, to replay later with --format trace
            Path(dataset).mkdir(parents=True, exist_ok=True)
            for conversation in generated:
                save_trace(conversation, Path(dataset) / f"{conversation.name}.jsonl")
        return generated, "synthetic", tool_specs()
    if not dataset:
        raise DatasetError("--dataset is required unless --format synthetic")
    path = Path(dataset)
    data_format = data_format or _guess_format(path)
    if data_format == "locomo":
        return [load_locomo(p) for p in _files(path, ".json")], "locomo", []
    return [load_trace(p) for p in _files(path, ".jsonl")], "trace", tool_specs()


def _strategies(text: str) -> list[str]:
    from ctx_langgraph.eval.strategies import STRATEGIES

    if text == "all":
        return list(STRATEGIES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown or not names:
        raise ValueError(f"unknown strategies {unknown}; choose from all, {', '.join(STRATEGIES)}")
    return names


_AUTO_MODELS = (
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-3-5-haiku-latest"),
)


def _model(spec: str | None) -> Any:
    """``None`` (offline), or a chat model: ``auto`` picks one whose API key is set."""
    if spec in (None, "", "offline", "scripted", "extractive"):
        return None
    if spec == "auto":
        spec = next((model for key, model in _AUTO_MODELS if os.environ.get(key)), None)
        if spec is None:
            return None
    from langchain.chat_models import init_chat_model

    return init_chat_model(spec, temperature=0)


def write_outputs(metrics: dict[str, Any], series: dict[str, Any], out: Path) -> list[Path]:
    """``metrics.json``, ``series.json``, ``report.md`` and the plots, in ``out``."""
    from ctx_langgraph.eval.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (out / "series.json").write_text(json.dumps(series) + "\n")
    return [out / "metrics.json", out / "series.json", *write_report(metrics, series, out)]


def _progress(quiet: bool, stream: TextIO) -> Any:
    from ctx_langgraph.eval.progress import Progress

    return Progress(enabled=not quiet, stream=stream)


def run_eval_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from ctx_langgraph.eval.harness import run_eval
    from ctx_langgraph.eval.report import category_table, summary_table

    try:
        strategies = _strategies(args.strategies)
        conversations, data_format, specs = load_dataset(
            args.dataset, args.format, seed=args.seed, sessions=args.sessions, turns=args.turns
        )
    except (DatasetError, ValueError) as exc:
        print(f"ctx-langgraph eval: {exc}", file=sys.stderr)
        return 2
    with _progress(args.quiet, sys.stderr) as progress:
        metrics, series = run_eval(
            conversations,
            strategies,
            window=args.window,
            dataset=args.dataset or f"synthetic (seed {args.seed})",
            data_format=data_format,
            seed=args.seed,
            retrieval_tokens=args.retrieval_tokens,
            reader=_model(args.reader),
            summary_model=_model(args.summarizer),
            tool_specs=specs,
            log=progress.log,
            progress=progress,
        )
    written = write_outputs(metrics, series, Path(args.out))
    print(summary_table(metrics), file=out)
    print("\n" + category_table(metrics), file=out)
    print(f"\nwrote {', '.join(str(p) for p in written)}", file=out)
    return 0


def add_eval_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="replay long conversations through context strategies and compare them",
        description="Replay conversations through every strategy, ask their questions at the "
        "end, and write metrics.json, series.json, report.md and plots.",
    )
    parser.add_argument(
        "--dataset",
        help="a LoCoMo JSON file, a JSONL trace, or a directory of them (synthetic: where to "
        "save the generated sessions, optional)",
    )
    parser.add_argument("--format", choices=FORMATS, help="default: from the file names")
    parser.add_argument(
        "--strategies", default="all", help="comma-separated strategy names, or all (default)"
    )
    parser.add_argument("--window", type=int, default=4096, help="context window in tokens")
    parser.add_argument("--out", default="eval-out", help="output directory (default eval-out)")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated sessions")
    parser.add_argument("--sessions", type=int, default=3, help="generated sessions (synthetic)")
    parser.add_argument("--turns", type=int, default=300, help="turns per generated session")
    parser.add_argument(
        "--retrieval-tokens", type=int, default=1000, help="the history lookup's page cap"
    )
    parser.add_argument(
        "--reader",
        default="auto",
        help="who answers the questions: auto (default: a real model when OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY is set, else the offline scripted reader), offline, or an "
        "init_chat_model spec such as openai:gpt-4o-mini",
    )
    parser.add_argument(
        "--summarizer",
        default="extractive",
        help="who summarizes, for every strategy alike: extractive (default, offline), auto, "
        "or an init_chat_model spec",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(run=run_eval_command)


# --------------------------------------------------------------------------- demo


def run_demo_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from ctx_langgraph.eval.demo import run_demo

    with tempfile.TemporaryDirectory(prefix="ctx-demo-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "history.sqlite"
        return run_demo(
            db=db,
            out_dir=Path(args.out),
            turns=args.turns,
            seed=args.seed,
            window=args.window,
            quiet=args.quiet,
            compare=not args.no_compare,
            out=out,
        )


def add_demo_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo",
        help="the context-managed agent on a generated 300-turn tool-heavy session, offline, "
        "then every strategy side by side",
    )
    parser.add_argument("--turns", type=int, default=300, help="turns of the session")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated session")
    parser.add_argument("--window", type=int, default=4096, help="context window in tokens")
    parser.add_argument("--db", help="SQLite history file to keep (default: a temporary one)")
    parser.add_argument("--out", default="ctx-demo-out", help="report directory")
    parser.add_argument("--no-compare", action="store_true", help="skip the strategy comparison")
    parser.add_argument("--quiet", action="store_true", help="no per-turn events")
    parser.set_defaults(run=run_demo_command)
