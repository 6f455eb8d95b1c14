"""Prunes one thread of a PostgreSQL checkpointer every N steps while another process runs a
graph on it: the other process of ``test_retention_acceptance``'s load test.

    python tests/retention_pruner.py DSN THREAD_ID STOP_FILE [--every 5] [--keep-last 3]

The step is the length of the ``steps`` channel of the thread's latest checkpoint. Prints
``{"ready": true}`` once connected, then one JSON line per prune (the step it saw, kept and
removed counts, removed writes and blobs, whether the run was still going), prunes once more
after ``STOP_FILE`` appears, and exits 0. Any error ends it with a traceback and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from langgraph.checkpoint.postgres import PostgresSaver

from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dsn")
    parser.add_argument("thread_id")
    parser.add_argument("stop_file", type=Path)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--keep-last", type=int, default=3)
    args = parser.parse_args(argv)
    latest_config = {"configurable": {"thread_id": args.thread_id}}
    with PostgresSaver.from_conn_string(args.dsn) as saver:
        retention = CheckpointRetention(saver, RetentionPolicy(keep_last=args.keep_last))
        print(json.dumps({"ready": True}), flush=True)
        pruned_at = 0
        while True:
            stopping = args.stop_file.exists()  # read before the step: the last prune sees all
            latest = saver.get_tuple(latest_config)
            step = len(latest.checkpoint["channel_values"].get("steps", ())) if latest else 0
            if stopping or step >= pruned_at + args.every:
                report = retention.prune(args.thread_id)
                pruned_at = step
                print(
                    json.dumps(
                        {
                            "step": step,
                            "kept": len(report.kept),
                            "removed": len(report.removed),
                            "removed_writes": report.removed_writes,
                            "removed_blobs": report.removed_blobs,
                            "during_run": not stopping,
                        }
                    ),
                    flush=True,
                )
            if stopping:
                return 0
            time.sleep(0.002)


if __name__ == "__main__":
    sys.exit(main())
