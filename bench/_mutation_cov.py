"""pytest plugin for ``bench/mutation.py --map``: which test executes which line, in any process.

Loaded with ``-p _mutation_cov`` inside ``coverage run`` (``[run] patch = subprocess``). Around each
test it names the coverage context after the test's node id twice: in this process
(``Coverage.switch_context``) and in ``COVERAGE_PROCESS_CONFIG``, the serialized configuration
that every Python subprocess the test starts (hooks, drains, ``cm flush``) measures itself with,
so lines run by a drain are credited to the test that caused the drain. It also records each
test's wall time and outcome in the JSON file ``CM_MUTATION_TIMES`` names (the harness runs the
fastest covering tests first).
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator

import coverage
import pytest

TIMES: dict[str, dict[str, object]] = {}


def _context(name: str) -> None:
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(name)
    raw = os.environ.get("COVERAGE_PROCESS_CONFIG")
    if raw:
        config = json.loads(base64.b64decode(raw))
        config["context"] = name
        os.environ["COVERAGE_PROCESS_CONFIG"] = base64.b64encode(json.dumps(config).encode()).decode()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _context(item.nodeid)
    started = time.monotonic()
    TIMES[item.nodeid] = {"seconds": 0.0, "passed": True}
    yield
    TIMES[item.nodeid]["seconds"] = round(time.monotonic() - started, 3)
    _context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and report.nodeid in TIMES:
        TIMES[report.nodeid]["passed"] = False


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("CM_MUTATION_TIMES")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(TIMES, handle)
