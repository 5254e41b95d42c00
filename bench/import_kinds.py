"""Benchmark: instructions to an agent kept out of the Profile — false refusals and misses.

Method: every labelled line of ``tests/fixtures/import_kinds/`` (facts about a user as a Memory
Agent writes them into the Profile; instructions to an agent as the agents' memory and rule files
hold them) is judged alone by ``cmrunner.core.directives.find``, the reader the Writer's import
kind rule uses (``writer_proc/contract.py``). A fact it flags is a *false refusal* (the Writer would
refuse that Profile write and the model must move or drop the fact); an instruction it passes is a
*miss* (it could reach the Profile). The development set was written first and the rules were
tuned on it; the held-out set was written after the rules were frozen. Also: the time to judge one
line (median of 20 passes over both sets). Usage: ``python bench/import_kinds.py [--write]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _util import ROOT, machine, write_section  # noqa: E402

from cmrunner.core import directives  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "fixtures", "import_kinds")


def load(name: str) -> list[str]:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8") as handle:
        return [line for line in handle.read().split("\n") if line.strip() and not line.startswith("# ")]


def measure(prefix: str) -> dict:
    facts, instructions = load(f"{prefix}facts"), load(f"{prefix}instructions")
    refused = [f for f in facts if directives.find(f) is not None]
    missed = [i for i in instructions if directives.find(i) is None]
    caught = len(instructions) - len(missed)
    return {"facts": len(facts), "instructions": len(instructions), "refused": refused, "missed": missed,
            "precision": caught / (caught + len(refused)) if caught + len(refused) else 1.0,
            "recall": caught / len(instructions)}


def per_line_us() -> float:
    lines = load("facts") + load("instructions") + load("heldout_facts") + load("heldout_instructions")
    passes = []
    for _ in range(20):
        started = time.perf_counter()
        for line in lines:
            directives.find(line)
        passes.append((time.perf_counter() - started) / len(lines) * 1e6)
    return statistics.median(passes)


def report() -> str:
    rows = ["| set | facts | false refusals | instructions | missed | precision | recall |",
            "|---|---|---|---|---|---|---|"]
    details = []
    for prefix, name in (("", "development"), ("heldout_", "held out")):
        m = measure(prefix)
        rows.append(f"| {name} | {m['facts']} | {len(m['refused'])} ({len(m['refused']) / m['facts']:.1%}) | "
                    f"{m['instructions']} | {len(m['missed'])} ({len(m['missed']) / m['instructions']:.1%}) | "
                    f"{m['precision']:.1%} | {m['recall']:.1%} |")
        details += [f"- {name}, refused fact: “{line}”" for line in m["refused"]]
        details += [f"- {name}, missed instruction: “{line}”" for line in m["missed"]]
    return "\n".join([f"Measured on {machine()}.", "", *rows, "",
                      f"Judging one line takes {per_line_us():.1f} µs (median of 20 passes; 1-minute load average "
                      f"{os.getloadavg()[0]:.1f} on this shared machine, so an upper figure).", "",
                      "Every line the reader got wrong:", "", *details])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the block in docs/benchmarks.md")
    args = parser.parse_args()
    text = report()
    print(text)
    if args.write:
        write_section("import-kinds", text)


if __name__ == "__main__":
    main()
