"""Where the repository lock's hold time goes in one Writer commit (prints; writes nothing).

Runs bench/writer.py's seal → published loop (scripted agent, fsync on) with each step of the
critical section in ``commit.commit`` wrapped in ``time.perf_counter_ns`` timers that count only
while the lock is held: the transaction's BEGIN and COMMIT, the fence, the CAS reads, the
transaction's verify / mark / publish (and inside publish the renames and directory fsyncs), and
``apply_receipt`` with its history and record steps. Per commit it sums each step; the table
gives median, mean and p95 over the commits (a step's rows include the steps indented under it).
Usage: `python bench/writer_lock.py [--batches 300]`.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import writer as writer_bench
from _util import machine, percentile

from cmrunner.capture import observations
from cmrunner.core import history, jobstore, records, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import commit, jobs, publish

held = {"now": False}
current: collections.Counter[str] = collections.Counter()
per_commit: dict[str, list[int]] = collections.defaultdict(list)


# In the order the critical section runs them; an indented row is a part of the rows above it.
BEGIN, COMMIT = "BEGIN IMMEDIATE (and the write gate)", "COMMIT"
STEPS: list[tuple[Any, str, str]] = [
    (jobs, "assert_lease", "fence (lease check)"),
    (commit, "current_hash", "CAS of unchanged documents"),
    (publish.Transaction, "verify_before", "verify_before"),
    (publish.Transaction, "mark", "mark"),
    (publish.Transaction, "publish", "publish"),
    (publish.os, "rename", "  mark + publish: renames"),
    (publish, "fsync_dir", "  mark + publish: directory fsyncs"),
    (commit, "apply_receipt", "apply_receipt"),
    (history, "settle", "  history.settle"),
    (records, "replace_links", "  records.replace_links"),
    (observations, "mark_processed", "  observations.mark_processed"),
    (jobstore, "finish", "  jobstore.finish"),
]


def timed(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not held["now"]:
            return original(*args, **kwargs)
        started = time.perf_counter_ns()
        try:
            return original(*args, **kwargs)
        finally:
            current[label] += time.perf_counter_ns() - started

    setattr(owner, name, wrapper)


def install() -> None:
    lock = commit.repository_lock

    @contextmanager
    def timed_lock(paths: DataPaths) -> Iterator[None]:
        with lock(paths):
            held["now"] = True
            current.clear()
            started = time.perf_counter_ns()
            try:
                yield
            finally:
                current["lock held"] += time.perf_counter_ns() - started
                held["now"] = False
                for label, ns in current.items():
                    per_commit[label].append(ns)

    commit.repository_lock = timed_lock  # type: ignore[assignment]
    immediate = store.immediate

    @contextmanager
    def timed_immediate(conn: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if not held["now"]:
            with immediate(conn, *args, **kwargs) as inner:
                yield inner
            return
        started = time.perf_counter_ns()
        transaction = immediate(conn, *args, **kwargs)
        inner = transaction.__enter__()
        current[BEGIN] += time.perf_counter_ns() - started
        try:
            yield inner
        except BaseException as exc:
            transaction.__exit__(type(exc), exc, exc.__traceback__)
            raise
        started = time.perf_counter_ns()
        transaction.__exit__(None, None, None)
        current[COMMIT] += time.perf_counter_ns() - started

    store.immediate = timed_immediate  # type: ignore[assignment]
    for owner, name, label in STEPS:
        timed(owner, name, label)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    install()
    load = os.getloadavg()[0]
    walls, _holds = writer_bench.seal_to_published(args.batches, raw=True)
    print(f"Machine: {machine()}; load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
          f"{len(per_commit['lock held'])} commits.\n")
    print("| step inside the lock | median (ms) | mean (ms) | p95 (ms) |")
    print("|---|---:|---:|---:|")
    for label in ["lock held", BEGIN, *(label for _owner, _name, label in STEPS), COMMIT]:
        values = [ns / 1e6 for ns in per_commit[label]]
        print(f"| {label} | {statistics.median(values):.3f} | {statistics.mean(values):.3f} | "
              f"{percentile(values, 95):.3f} |")
    print(f"\nseal → published: median {statistics.median(walls):.2f} ms, p95 {percentile(walls, 95):.2f} ms")


if __name__ == "__main__":
    main()
