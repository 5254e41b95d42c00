"""Benchmark: secret detection and false-positive rates over the fake-secret corpus, and costs.

Method: ``tests/fixtures/secrets_corpus.py`` builds the corpus at run time (fake secrets from a
seeded generator; look-alikes that are not secrets). A secret counts as detected when the scanner
reports a ``secret.*`` rule for its text; a look-alike is a false positive when the scanner reports
anything for it. Three scanners: cm's light rules (what the read path runs), cm's deep scan (light
rules plus detect-secrets' provider plugins, what the drain, import and CLI run), and detect-secrets
1.5 alone with every plugin and its default filters in file-scan mode (``SecretsCollection.scan_file``,
what ``detect-secrets scan`` does), one file per text. Import cost: ``python -X importtime`` of
``detect_secrets.plugins.aws`` (which loads the package), cumulative microseconds of the top-level
import, median of 5 fresh interpreters. Scan time: median of 20 scans of a 16 KiB memory document
(the Writer's hard budget) with the light rules and with the deep scan. Read-path time: median of
20 ``withhold.document`` calls on that document with and without a findings-cache entry.
Usage: ``python bench/secrets.py [--write]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
from _util import machine, write_section  # noqa: E402
from secrets_corpus import LOOKALIKES, SECRETS  # noqa: E402

from cmrunner.secrets import safety  # noqa: E402


def _cm(text: str, deep: bool) -> tuple[bool, bool]:
    found = safety.scan_text(text, deep=deep)
    return any(v.rule_id.startswith("secret.") for v in found), bool(found)


def _detect_secrets_alone() -> tuple[callable, str] | None:
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    import tempfile

    def scan(text: str) -> tuple[bool, bool]:
        # file-scan mode (``detect-secrets scan``): every plugin, default filters, one file per text
        with tempfile.TemporaryDirectory() as where, default_settings():
            path = os.path.join(where, "memory.md")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            found = SecretsCollection()
            found.scan_file(path)
            hit = bool(list(found))
        return hit, hit

    from importlib.metadata import version
    return scan, version("detect-secrets")


def _rates(scan: callable) -> tuple[int, int, list[str], list[str]]:
    detected = [fmt for fmt, text in SECRETS if scan(text)[0]]
    missed = sorted({fmt for fmt, text in SECRETS if not scan(text)[0]})
    flagged = [kind for kind, text in LOOKALIKES if scan(text)[1]]
    return len(detected), len(flagged), missed, sorted(set(flagged))


def _import_cost() -> float | None:
    samples = []
    for _ in range(5):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import detect_secrets.plugins.aws"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        for line in proc.stderr.splitlines():
            if line.rstrip().endswith("| detect_secrets.plugins.aws"):
                samples.append(int(line.split("|")[1]) / 1000)
    return statistics.median(samples) if samples else None


def _document() -> str:
    parts = ["# Preferences\n"]
    index = 0
    while sum(len(p) for p in parts) < 16 * 1024 - 400:
        parts.append(f"\n## Topic {index}\nThe user prefers concise answers, runs pytest -q before commits, keeps "
                     f"commit {index:040x} in mind and uses src/module_{index}/handler.py for the handlers.\n")
        index += 1
    return "".join(parts)


def _median_ms(function: callable, *args: object, runs: int = 20) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        function(*args)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    rows = []
    scanners = [("cm light rules (read path)", lambda t: _cm(t, False)), ("cm deep scan (drain, import, CLI)",
                                                                         lambda t: _cm(t, True))]
    alone = _detect_secrets_alone()
    if alone is not None:
        scanners.append((f"detect-secrets {alone[1]} alone, all plugins, file-scan mode", alone[0]))
    formats = len({fmt for fmt, _ in SECRETS})
    for name, scan in scanners:
        hits, flagged, missed, fp_kinds = _rates(scan)
        rows.append(f"| {name} | {hits}/{len(SECRETS)} ({100 * hits / len(SECRETS):.0f}%) | "
                    f"{flagged}/{len(LOOKALIKES)} ({100 * flagged / len(LOOKALIKES):.0f}%) | "
                    f"{', '.join(missed) or '-'} | {', '.join(fp_kinds) or '-'} |")
    doc = _document()
    light_ms = _median_ms(lambda d: safety.scan_text(d, deep=False), doc)
    safety.scan_text(doc, deep=True)  # the first deep scan imports detect-secrets
    deep_ms = _median_ms(lambda d: safety.scan_text(d, deep=True), doc)
    import_ms = _import_cost()
    lines = [
        f"Machine: {machine()}; corpus: {len(SECRETS)} fake secrets in {formats} formats, "
        f"{len(LOOKALIKES)} look-alikes.", "",
        "| scanner | secrets detected | look-alikes flagged | formats missed | look-alike kinds flagged |",
        "|---|---:|---:|---|---|", *rows, "",
        "| cost | median |", "|---|---:|",
        f"| scan a 16 KiB document, light rules | {light_ms:.2f} ms |",
        f"| scan a 16 KiB document, deep scan | {deep_ms:.2f} ms |",
    ]
    if import_ms is not None:
        lines.append(f"| `import detect_secrets` (python -X importtime, cumulative) | {import_ms:.0f} ms |")
    try:
        from cmrunner.secrets import withhold
    except ImportError:
        withhold = None
    if withhold is not None:
        lines.append(f"| read path: withhold check of that document, light rules (cache miss) | "
                     f"{_median_ms(withhold.scan_units, doc):.2f} ms |")
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section("secrets", body)


if __name__ == "__main__":
    main()
