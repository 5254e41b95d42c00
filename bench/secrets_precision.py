"""Benchmark: the secret detector on realistic memory documents — false alarms and misses, per rule.

Method: ``tests/fixtures/memory_corpus.py`` builds, from a fixed seed, 320 benign developer memory
documents (cm's own layout and hand-edited layouts, full of ids) and 124 documents that each hold
one fake secret in a real format. Every document is read the way ``cm secrets list`` and ``cm show``
read it: ``secrets.withhold.scan_units`` with the deep scan (light rules plus detect-secrets'
provider plugins), and again with the light rules only (the hook's read path on a findings-cache
miss). Then:
- a benign document is *flagged* when any of its units (the text before the first ``##`` and each
  ``##`` section) is withheld; a benign *section withheld* is one such unit, over all units;
- a benign document's *import is refused* when ``safety.scan_value({"text": …})`` reports any rule
  (personal-data rules included), which is what ``cm import`` checks;
- a secret is *caught* when the unit that holds it is withheld (so it never reaches a reader) and
  ``safety.scan_text`` reports a ``secret.*`` rule for the document (so import and the Writer refuse it).
Per rule: the benign documents and sections the rule flags, and the secrets it catches (a secret
may be caught by two rules). Usage:
``python bench/secrets_precision.py [--write] [--label before|after]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
from _util import machine, write_section  # noqa: E402
from memory_corpus import benign, digest, secret  # noqa: E402

from cmrunner.secrets import safety, withhold  # noqa: E402


def measure(deep: bool) -> dict:
    """Every rate of the module docstring, for one scanner setting."""
    docs, planted = benign(), secret()
    flagged_docs: Counter[str] = Counter()
    flagged_units: Counter[str] = Counter()
    refused = 0
    units_total = units_withheld = docs_flagged = 0
    examples: dict[str, list[str]] = defaultdict(list)
    for doc in docs:
        found = withhold.scan_units(doc.text, deep)
        units_total += len(withhold.units(doc.text))
        units_withheld += len({f.unit for f in found})
        docs_flagged += bool(found)
        for rule in {f.rule for f in found}:
            flagged_docs[rule] += 1
            examples[rule].append(doc.name)
        flagged_units.update(rule for rule, _ in {(f.rule, f.unit) for f in found})
        refused += bool(safety.scan_value({"text": doc.text}, deep=deep))
    caught_by: Counter[str] = Counter()
    missed: list[str] = []
    caught = 0
    for doc in planted:
        found = [f for f in withhold.scan_units(doc.text, deep) if f.unit == doc.secret_section]
        rejected = any(v.rule_id.startswith("secret.") for v in safety.scan_text(doc.text, deep=deep))
        if found and rejected:
            caught += 1
            for rule in {f.rule for f in found}:
                caught_by[rule] += 1
        else:
            missed.append(doc.secret_format or doc.name)
    return {"docs": len(docs), "docs_flagged": docs_flagged, "units": units_total, "units_withheld": units_withheld,
            "refused": refused, "secrets": len(planted), "caught": caught, "missed": sorted(set(missed)),
            "flagged_docs": flagged_docs, "flagged_units": flagged_units, "caught_by": caught_by,
            "examples": {rule: names[:3] for rule, names in examples.items()},
            "corpus": digest(docs + planted)}


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)"


def table(result: dict, label: str) -> list[str]:
    lines = [f"**{label}** — corpus {result['corpus']}: {result['docs']} benign documents "
             f"({result['units']} units), {result['secrets']} planted secrets.", "",
             "| | result |", "|---|---:|",
             f"| benign documents flagged | {_pct(result['docs_flagged'], result['docs'])} |",
             f"| benign sections withheld | {_pct(result['units_withheld'], result['units'])} |",
             f"| benign documents whose import is refused | {_pct(result['refused'], result['docs'])} |",
             f"| secrets caught | {_pct(result['caught'], result['secrets'])} |",
             f"| formats missed | {', '.join(result['missed']) or '-'} |", "",
             "| rule | benign documents flagged | benign sections withheld | secrets caught |", "|---|---:|---:|---:|"]
    rules = sorted(set(result["flagged_docs"]) | set(result["caught_by"]))
    for rule in rules:
        lines.append(f"| `{rule}` | {result['flagged_docs'][rule]} | {result['flagged_units'][rule]} | "
                     f"{result['caught_by'][rule]} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--label", default="after", help="the block to write: before or after")
    parser.add_argument("--examples", action="store_true", help="print flagged benign document names")
    args = parser.parse_args()
    started = time.perf_counter()
    deep = measure(True)
    light = measure(False)
    seconds = time.perf_counter() - started
    lines = [f"Machine: {machine()}; both scans of the whole corpus took {seconds:.1f} s.", "",
             *table(deep, "deep scan (cm secrets list, cm show, the drain, import)"), "",
             *table(light, "light rules only (the hook's read path on a findings-cache miss)")]
    body = "\n".join(lines)
    print(body)
    if args.examples:
        for rule, names in deep["examples"].items():
            print(rule, names)
    if args.write:
        write_section(f"secrets-precision-{args.label}", body)


if __name__ == "__main__":
    main()
