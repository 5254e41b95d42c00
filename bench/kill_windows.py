"""Pass counts and kill fractions of the crash and timing tests whose windows are calibrated (issue 37).

Method: each repetition is one pytest run of TESTS (each test in its own temporary home, as in the
suite). ``--runs`` repetitions run with no extra load ("quiet"), then ``--runs`` with both cores
busy ("busy": ``support.killwindow.busy_cores(2, ...)``, two CPU-bound processes that end by
themselves after ``BUSY_BOUND_S`` and are SIGKILLed by PID when the repetition ends). The tests
append their kill outcomes to the file ``CM_KILL_STATS`` names; pytest's JUnit XML gives each
test's pass or fail. The machine is shared with other engineers, so it is never idle: the 1-minute
load average is read (``os.getloadavg()``) before and after every repetition and printed beside
each series. Run the whole script under ``nice -n 10``: the busy processes inherit the niceness,
so they compete with the tests as equals.

Usage: ``nice -n 10 .venv/bin/python bench/kill_windows.py [--runs 10] [--series quiet,busy]
[--json /tmp/kill_windows.json] [--write] [TEST ...]``; prints a Markdown table (``--write``: into
docs/benchmarks.md). ``--from A.json,B.json`` renders the table from earlier runs' records instead of
running (e.g. a quiet series run while the machine was idle and a busy one run later).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import ROOT, machine, write_section  # _util also puts tests/ on sys.path
from support import killwindow

TESTS = [
    "tests/test_writer_crash.py::test_random_sigkill_soak",
    "tests/test_hook_crash.py::test_sigkill_at_random_points_leaves_each_event_whole_or_absent",
    "tests/test_hook_crash.py::test_sigkill_of_cm_hook_claude_leaves_each_prompt_whole_or_absent",
    "tests/test_drain.py::test_dead_holder_is_taken_over_at_once",
    "tests/test_drain.py::test_hook_spawns_a_detached_drain_that_inherits_nothing",
    "tests/test_drain.py::test_concurrent_hooks_keep_exactly_one_drain_alive",
    "tests/test_agent_failures.py::test_whole_attempt_deadline_cuts_a_slow_stream",
    "tests/test_agent_failures.py::test_stream_idle_timeout_is_separate_from_the_header_timeout",
    "tests/test_agent_failures.py::test_a_stall_shorter_than_the_idle_timeout_is_fine",
]
BUSY_BOUND_S = 1800  # longer than one repetition; the processes are killed by PID when it ends
PYTEST = os.path.join(os.path.dirname(sys.executable), "pytest")


def _outcomes(junit: str) -> dict[str, bool]:
    """Test name -> passed, from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = any(child.tag in ("failure", "error", "skipped") for child in case)
        found[case.get("name", "")] = not failed
    return found


def repetition(series: str, tests: list[str]) -> dict:
    """One pytest run of ``tests``; under ``busy`` load when ``series`` says so."""
    with tempfile.TemporaryDirectory(prefix="cm-killwin-") as scratch:
        stats, junit = os.path.join(scratch, "stats.jsonl"), os.path.join(scratch, "junit.xml")
        env = dict(os.environ, **{killwindow.STATS_ENV: stats})
        argv = [PYTEST, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *tests]
        load_before = os.getloadavg()[0]
        began = time.monotonic()
        if series == "busy":
            with killwindow.busy_cores(2, BUSY_BOUND_S):
                proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=BUSY_BOUND_S)
        else:
            proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=BUSY_BOUND_S)
        took = time.monotonic() - began
        load_after = os.getloadavg()[0]
        outcomes = _outcomes(junit) if os.path.exists(junit) else {}
        kills = [json.loads(line) for line in open(stats)] if os.path.exists(stats) else []
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout.decode(errors="replace")[-3000:])
    return {"series": series, "load_before": load_before, "load_after": load_after, "seconds": took,
            "passed": outcomes, "kills": kills}


def _fraction(rows: list[dict], key: str) -> str:
    values = [r[key] / r["trials"] for r in rows if key in r]
    if not values:
        return "-"
    return f"{statistics.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def table(results: list[dict], tests: list[str]) -> str:
    lines = ["| series | test | passed | killed / trials, mean (min-max) | mid-job / trials | window, median |"
             " load avg 1 min before → after (min-max) | s per repetition, median |",
             "|---|---|---|---|---|---|---|---|"]
    for series in dict.fromkeys(r["series"] for r in results):
        runs = [r for r in results if r["series"] == series]
        loads = (f"{min(r['load_before'] for r in runs):.1f}-{max(r['load_before'] for r in runs):.1f} → "
                 f"{min(r['load_after'] for r in runs):.1f}-{max(r['load_after'] for r in runs):.1f}")
        seconds = statistics.median(r["seconds"] for r in runs)
        for test in tests:
            name = test.split("::")[-1]
            passed = sum(r["passed"].get(name, False) for r in runs)
            short = test.split("/")[-1].replace(".py::", "::")
            kills = [k for r in runs for k in r["kills"] if _stat_of(k["test"]) == name]
            window = "-"
            if kills:
                # The latest kill point, the linger, or the time bound the test derived from its runs.
                spans = [k.get("window_s") or k.get("linger_s") or k.get("bound_s") for k in kills]
                spans = [s for s in spans if s is not None]
                window = f"{statistics.median(spans):.2f} s" if spans else "-"
            lines.append(f"| {series} | {short} | {passed}/{len(runs)} | {_fraction(kills, 'killed')} |"
                         f" {_fraction(kills, 'mid_job')} | {window} | {loads} | {seconds:.0f} |")
    return "\n".join(lines)


# The name each test records its stats under (support.killwindow.record) -> the pytest test name.
STAT_NAMES = {
    "writer_crash.soak": "test_random_sigkill_soak",
    "hook_crash.codex": "test_sigkill_at_random_points_leaves_each_event_whole_or_absent",
    "hook_crash.claude": "test_sigkill_of_cm_hook_claude_leaves_each_prompt_whole_or_absent",
    "drain.dead_holder": "test_dead_holder_is_taken_over_at_once",
    "drain.concurrent_hooks": "test_concurrent_hooks_keep_exactly_one_drain_alive",
    "agent.idle_timeout": "test_stream_idle_timeout_is_separate_from_the_header_timeout",
    "agent.stall": "test_a_stall_shorter_than_the_idle_timeout_is_fine",
}


def _stat_of(recorded: str) -> str:
    return STAT_NAMES.get(recorded, recorded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--series", default="quiet,busy")
    parser.add_argument("--json", default=None, help="also write every repetition's record here")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--from", dest="sources", default=None,
                        help="comma-separated --json files of earlier runs: render them, run nothing")
    parser.add_argument("tests", nargs="*", default=TESTS)
    args = parser.parse_args()
    results = []
    if args.sources:
        for source in args.sources.split(","):
            with open(source, encoding="utf-8") as handle:
                results.extend(json.load(handle))
    for series in [] if args.sources else args.series.split(","):
        for n in range(args.runs):
            result = repetition(series, args.tests)
            results.append(result)
            print(f"{series} {n + 1}/{args.runs}: load {result['load_before']:.1f} → {result['load_after']:.1f},"
                  f" {result['seconds']:.0f} s, passed {sum(result['passed'].values())}/{len(args.tests)},"
                  f" kills {[(k['test'], k.get('killed'), k.get('trials')) for k in result['kills']]}", flush=True)
            if args.json:
                with open(args.json, "w", encoding="utf-8") as handle:
                    json.dump(results, handle, indent=1)
    counts = ", ".join(f"{series} {sum(r['series'] == series for r in results)}"
                       for series in dict.fromkeys(r["series"] for r in results))
    body = (f"Machine: {machine()}; repetitions per series: {counts}; all under `nice -n 10`.\n\n"
            + table(results, args.tests))
    print(body)
    if args.write:
        write_section("kill_windows", body)


if __name__ == "__main__":
    main()
