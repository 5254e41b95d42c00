"""Benchmark: what importing a module costs a fresh interpreter, the figures the prose of docs/benchmarks.md quotes.

Method: for each module, ``python -X importtime -I -c "import <module>"`` in a fresh interpreter (the
installed cm's own interpreter), ``runs`` times (default 7); the figure is the median of the
cumulative microseconds ``-X importtime`` reports for the module's own top-level line, so it
includes every module it imports that was not loaded yet at that point (``-I``: no user site, no
environment variables, no current directory on the path). Modules: the ``json`` package and the
``re`` and ``enum`` modules (what the hook path avoids or pays), the MCP SDK (``mcp`` and its
server, what ``cm mcp`` loads before it answers ``initialize``) and cm's click CLI
(``cmrunner.cli``, what every management command such as ``cm show`` imports).
Usage: ``python bench/imports.py [--write] [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import machine, write_section

MODULES = (
    ("json", "the `json` package (the hook path uses `_json` directly instead)"),
    ("re", "the `re` module (the console script's own import)"),
    ("enum", "the `enum` module"),
    ("mcp.server.mcpserver", "the MCP SDK's server (`cm mcp` loads it before answering `initialize`)"),
    ("cmrunner.cli", "cm's click CLI and its command modules (every `cm <command>`, e.g. `cm show`)"),
)


def import_ms(module: str, runs: int) -> float:
    """Median cumulative import time of ``module`` in a fresh interpreter, in milliseconds."""
    samples = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-I", "-c", f"import {module}"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise SystemExit(f"import {module} failed: {proc.stderr.strip()[-300:]}")
        lines = [line for line in proc.stderr.splitlines() if line.rstrip().endswith(f"| {module}")]
        samples.append(int(lines[-1].split("|")[1]) / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    rows = [f"| `import {module}` | {what} | {import_ms(module, args.runs):.1f} |" for module, what in MODULES]
    load = os.getloadavg()[0]
    body = "\n".join([f"Machine: {machine()}; {args.runs} fresh interpreters per module, median; "
                      f"load average {load:.1f} at the start.", "",
                      "| import | what it is | cumulative (ms) |", "|---|---|---:|", *rows])
    print(body)
    if args.write:
        write_section("imports", body)


if __name__ == "__main__":
    main()
