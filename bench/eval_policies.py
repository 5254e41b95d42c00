"""`cm eval` against the fake model's policies: does the harness tell careful from faulty writing?

Method: the installed cm runs the whole shipped suite once per policy of the fake model
(``cmrunner.synthetic``: ``careful``, one ``faulty_<class>`` per violation class, and two baselines,
``remember_user_turns`` — every user turn copied into a section, as ``cm demo`` did before — and
``ignore``, which never writes), through ``cmrunner.evals.runner`` exactly as ``cm eval --synthetic
POLICY --jobs 2`` does: each world in its own temporary home with its own fake model on 127.0.0.1,
sessions played through real ``cm hook codex`` subprocesses, the real detached drain, the real
Writer and Memory Agent over the Responses protocol, the checks on the committed Markdown. Requests,
tokens and bytes come from each world's disclosure ledger (the fake model reports a quarter of each
request's and answer's bytes as tokens: an estimate, not a real tokenizer's count). Seconds are wall
time on this machine, two worlds at a time, with other work running beside it.

These policies are a few rules for a fixed phrasebook: the table shows that the harness scores
them as designed, and says nothing about any real model.
Usage: `python bench/eval_policies.py [--write] [--policy NAME ...]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import ROOT, machine, percentile, write_section

from cmrunner.evals import models, report as report_mod, runner, world as world_mod
from cmrunner.synthetic import faulty

EVAL_MD = os.path.join(ROOT, "docs", "eval.md")
POLICIES = ("careful", *faulty.FAULTY, "remember_user_turns", "ignore")
JOBS = 2


def run(policy: str) -> report_mod.Report:
    tested = models.resolve(os.path.join(ROOT, "no-home"), models.Choice(synthetic=policy))
    return runner.drive(runner.run(world_mod.shipped(), tested, None, JOBS))


def _short(name: str) -> str:
    return name.replace("_as_", " as ").replace("_", " ")


def tables(results: dict[str, report_mod.Report]) -> list[str]:
    rows = ["| policy | worlds passed | score | failed classes | requests / user turn | tokens / user turn | "
            "bytes sent / user turn | suite seconds |", "|---|---:|---:|---|---:|---:|---:|---:|"]
    for policy, r in results.items():
        per = r.cost.perUserTurn if r.cost else None
        cost = (f"{per['requests']:.2f} | {per['tokens']:,.0f} | {per['bytesSent']:,.0f}" if per else "— | — | —")
        rows.append(f"| `{policy}` | {r.score.passed}/{r.score.worlds} | {r.score.percent:g}% | "
                    f"{', '.join(r.failedClasses) or 'none'} | {cost} | {r.seconds:.0f} |")
    classes = [c.class_ for c in next(iter(results.values())).classes]
    rows += ["", "Checks passed per class:", "",
             "| policy | " + " | ".join(_short(c) for c in classes) + " |", "|---|" + "---:|" * len(classes)]
    for policy, r in results.items():
        cells = {c.class_: c for c in r.classes}
        rows.append(f"| `{policy}` | " + " | ".join(
            f"{'**' if cells[c].status == 'failed' else ''}{cells[c].passed}/{cells[c].checks}"
            f"{'**' if cells[c].status == 'failed' else ''}" for c in classes) + " |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="replace the table in docs/eval.md")
    parser.add_argument("--policy", action="append", choices=POLICIES, help="only these policies")
    args = parser.parse_args()
    results: dict[str, report_mod.Report] = {}
    started = time.monotonic()
    for policy in args.policy or POLICIES:
        results[policy] = run(policy)
        print(f"{policy}: {results[policy].score.percent:g}% in {results[policy].seconds:.0f} s", file=sys.stderr)
    careful = results.get("careful")
    seconds = [w.seconds for w in careful.worlds] if careful else []
    timing = (f"Per world with the careful policy: median {statistics.median(seconds):.1f} s, p95 "
              f"{percentile(seconds, 95):.1f} s, max {max(seconds):.1f} s (hooks, drain, Writer, checks and "
              "clean-up of one world; two worlds at a time)." if seconds else "")
    body = "\n".join([f"Machine: {machine()}. {len(world_mod.shipped())} worlds per policy, `--jobs {JOBS}`, "
                      f"{time.monotonic() - started:.0f} s in all.", "", *tables(results), "", timing])
    print(body)
    if args.write:
        write_section("eval-policies", body, EVAL_MD)


if __name__ == "__main__":
    main()
