"""Benchmark: the secret detector on a second, independent corpus, tuning part and held-out part.

Method: ``tests/fixtures/scanner_corpus.py`` builds two parts from fixed seeds (formats from the lists
that gitleaks, TruffleHog and detect-secrets publish, plus the common forms of issue 32: credentials
on command lines, login/password pairs in prose, ``.env`` keys, cloud connection strings, a PEM body
without its BEGIN line, a prefixed token in spaced groups; benign documents full of look-alikes).
The rules were tuned looking at the tuning part only; the held-out part is measured, never read for
failures (``--details`` lists the missed formats and flagged lines of the tuning part only).
Every document is read as ``cm secrets list`` / ``cm show`` read it (``secrets.withhold.scan_units``),
with the deep scan and with the light rules (the hook's read path on a findings-cache miss):
- a benign document is *flagged* when any of its units is withheld; a *section withheld* is one such unit;
- a secret is *caught* when the unit holding it is withheld and ``safety.scan_text`` reports a
  ``secret.*`` rule for the document (so import and the Writer refuse it).
Per family of secret forms: secrets caught. Per rule: benign documents flagged, benign sections withheld,
secrets caught (a secret may be caught by two rules). Usage:
``python bench/secrets_heldout.py [--write] [--label after] [--details]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
from _util import machine, write_section  # noqa: E402
from scanner_corpus import PARTS, corpus, digest  # noqa: E402

from cmrunner.secrets import safety, withhold  # noqa: E402


def measure(part: str, deep: bool, details: bool = False) -> dict:
    benign, secrets = corpus(part)
    out: dict = {"docs": len(benign), "secrets": len(secrets), "corpus": digest(benign + secrets),
                 "flagged_docs": Counter(), "flagged_units": Counter(), "caught_by": Counter(),
                 "family_total": Counter(), "family_caught": Counter(), "missed": Counter(), "flag_lines": Counter()}
    units = withheld = flagged = 0
    for doc in benign:
        found = withhold.scan_units(doc.text, deep)
        parts = withhold.units(doc.text)
        units += len(parts)
        withheld += len({f.unit for f in found})
        flagged += bool(found)
        for rule in {f.rule for f in found}:
            out["flagged_docs"][rule] += 1
        out["flagged_units"].update(rule for rule, _ in {(f.rule, f.unit) for f in found})
        if details and found:
            for unit in {f.unit for f in found}:
                for line in parts[unit].splitlines():
                    if withhold.scan_units(line, deep):
                        out["flag_lines"][line.strip()[:140]] += 1
    caught = 0
    for doc in secrets:
        found = [f for f in withhold.scan_units(doc.text, deep) if f.unit == doc.section]
        rejected = any(v.rule_id.startswith("secret.") for v in safety.scan_text(doc.text, deep=deep))
        out["family_total"][doc.family] += 1
        if found and rejected:
            caught += 1
            out["family_caught"][doc.family] += 1
            out["caught_by"].update({f.rule for f in found})
        elif details:
            out["missed"][f"{doc.family}: {doc.fmt}"] += 1
    out.update(units=units, withheld=withheld, flagged=flagged, caught=caught)
    return out


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "-"


def table(results: dict[str, dict], label: str) -> list[str]:
    tune, held = results["tuning"], results["heldout"]
    lines = [f"**{label}** — tuning part {tune['corpus']}, held-out part {held['corpus']}: each "
             f"{tune['docs']} benign documents and {tune['secrets']} planted secrets.", "",
             "| | tuning | held-out |", "|---|---:|---:|",
             f"| benign documents flagged | {_pct(tune['flagged'], tune['docs'])} | {_pct(held['flagged'], held['docs'])} |",
             f"| benign sections withheld | {_pct(tune['withheld'], tune['units'])} | "
             f"{_pct(held['withheld'], held['units'])} |",
             f"| secrets caught | {_pct(tune['caught'], tune['secrets'])} | {_pct(held['caught'], held['secrets'])} |",
             "", "| family of forms | caught, tuning | caught, held-out |", "|---|---:|---:|"]
    for family in sorted(set(tune["family_total"]) | set(held["family_total"])):
        lines.append(f"| {family} | {_pct(tune['family_caught'][family], tune['family_total'][family])} | "
                     f"{_pct(held['family_caught'][family], held['family_total'][family])} |")
    lines += ["", "| rule | benign docs flagged (tuning / held-out) | benign sections withheld (tuning / held-out) "
              "| secrets caught (tuning / held-out) |", "|---|---:|---:|---:|"]
    rules = sorted(set().union(*(r[k] for r in (tune, held) for k in ("flagged_docs", "caught_by"))))
    for rule in rules:
        lines.append(f"| `{rule}` | {tune['flagged_docs'][rule]} / {held['flagged_docs'][rule]} | "
                     f"{tune['flagged_units'][rule]} / {held['flagged_units'][rule]} | "
                     f"{tune['caught_by'][rule]} / {held['caught_by'][rule]} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--label", default="after", help="the block to write: before or after")
    parser.add_argument("--details", action="store_true", help="list the tuning part's misses and flagged lines")
    parser.add_argument("--light-only", action="store_true", help="skip the deep scan (faster while tuning)")
    args = parser.parse_args()
    started = time.perf_counter()
    blocks = []
    settings = [(False, "light rules only (the hook's read path on a findings-cache miss)")]
    if not args.light_only:
        settings.insert(0, (True, "deep scan (cm secrets list, cm show, the drain, import)"))
    for deep, label in settings:
        results = {part: measure(part, deep, details=args.details and part == "tuning") for part in PARTS}
        blocks.append((label, results))
        if args.details:
            for what in ("missed", "flag_lines"):
                for key, count in results["tuning"][what].most_common():
                    print(f"tuning {what} [{'deep' if deep else 'light'}] {count}x {key}")
    seconds = time.perf_counter() - started
    lines = [f"Machine: {machine()}; the scans took {seconds:.1f} s."]
    for label, results in blocks:
        lines += ["", *table(results, label)]
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section(f"secrets-heldout-{args.label}", body)


if __name__ == "__main__":
    main()
