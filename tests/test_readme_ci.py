"""CI runs exactly the README's test command (a clean clone must pass with the README alone)."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _commands(path: str) -> list[str]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return [line.strip() for line in handle if re.match(r"^\s*python3 -m venv", line)]


def test_ci_runs_the_readme_test_command():
    readme = _commands("README.md")
    assert len(readme) == 2, "the README gives two set-up commands: the main job and the tests"
    main_job, tests = readme
    assert main_job.endswith("cm demo") and tests.endswith("pytest")
    assert _commands(".ci/run") == [tests]
