"""Property test: arbitrary bytes and arbitrary JSON fed to the real hook entry.

The hook must never raise past its boundary (no traceback, exit 0 or 1 only, never 2), must answer
with one JSON line or one ``cm: CODE: message`` line, and must write no row for rejected input.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import Transcript, event, run_hook, table_counts
from hypothesis import HealthCheck, given, settings, strategies as st

pytestmark = pytest.mark.usefixtures("quiet_drain")  # inspect exactly what was admitted

LINE = re.compile(r"^cm: [A-Z][A-Z0-9_]+: [^\n]+\n$")
FIELDS = ("hook_event_name", "session_id", "transcript_path", "cwd", "source", "turn_id", "prompt", "model",
          "tool_name", "reason")
NAMES = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "Interrupt", "SessionEnd", "PreToolUse",
         "Teleport", "")

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _check(proc, before: dict[str, int], after: dict[str, int]) -> None:
    assert proc.returncode in (0, 1), proc.returncode
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err
    if proc.returncode == 0:
        assert len(proc.stdout.splitlines()) == 1
        json.loads(proc.stdout)
    else:
        assert LINE.match(err), err
        assert "INTERNAL_ERROR" not in err, err
        assert proc.stdout == b""
        assert after == before, "a rejected event must not write any row"


@FUZZ
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes(home, raw):
    before = table_counts(home)
    proc = run_hook(home, raw)
    _check(proc, before, table_counts(home))


@FUZZ
@given(body=json_values)
def test_arbitrary_json(home, body):
    before = table_counts(home)
    proc = run_hook(home, json.dumps(body).encode())
    _check(proc, before, table_counts(home))


@FUZZ
@given(data=st.data())
def test_near_valid_events(home, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fuzz")
    transcript = Transcript(str(root / "t.jsonl"), root.name)  # a fresh session per example
    (root / "w").mkdir()
    base = event("SessionStart", transcript, str(root / "w"), source="startup")
    assert run_hook(home, base).returncode == 0
    transcript.user_turn("t1", "x")
    mutated = dict(base, hook_event_name=data.draw(st.sampled_from(NAMES)), turn_id="t1", prompt="x")
    for key in data.draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        if data.draw(st.booleans()):
            mutated.pop(key, None)
        else:
            mutated[key] = data.draw(json_values | st.sampled_from(["/", "/tmp/x", "relative", "startup", "a\u0000b"]))
    before = table_counts(home)
    proc = run_hook(home, json.dumps(mutated).encode())
    _check(proc, before, table_counts(home))
