"""The linter, the type checker and the import boundaries run with the suite, so `.ci/run` enforces them.

- ruff checks the source tree with the rule set chosen in pyproject.toml (``[tool.ruff]``).
- import-linter checks the *installed* package (where hooks/, bridge/ and writer_proc/ live inside
  ``cmrunner``) against the contracts in ``[tool.importlinter]``: the rooms table of
  docs/architecture.md (layers, and what each room may import), the secret detector's private
  modules, and no import cycle anywhere, deferred imports included; every contract must be kept.
- mypy checks the installed package with ``[tool.mypy]`` (every definition typed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def test_ruff_finds_nothing():
    proc = subprocess.run([os.path.join(BIN, "ruff"), "check", "--output-format", "concise",
                           "cmrunner", "writer_proc", "hooks", "bench", "tests"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts_are_kept(tmp_path):
    # Run outside the checkout so the installed package, not the source folder, is what is read.
    proc = subprocess.run([os.path.join(BIN, "lint-imports"), os.path.join(REPO, "pyproject.toml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        contracts = len(tomllib.load(handle)["tool"]["importlinter"]["contracts"])
    assert f"Contracts: {contracts} kept, 0 broken." in proc.stdout


def test_types_check(tmp_path):
    # The installed package, so hooks/, bridge/ and writer_proc/ are checked inside cmrunner.
    proc = subprocess.run([os.path.join(BIN, "mypy"), "-p", "cmrunner", "--config-file",
                           os.path.join(REPO, "pyproject.toml"), "--cache-dir", str(tmp_path / "cache")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
