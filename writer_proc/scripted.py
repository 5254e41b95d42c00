"""A scripted Memory Agent for the drain, selected by ``COMMON_MEMORY_AGENT_SCRIPT``.

Why: the Writer's crash suite and benchmarks must SIGKILL and time a real ``cm session-drain``
process before the network Memory Agent exists, and without a paid model afterwards. When the
variable names a JSON file, the drain uses ``ScriptedPort`` with decisions from that file instead
of a model. It is never used unless the variable is set; ``cm status`` has no knowledge of it.

File format: ``{"decisions": [<decision template>, ...]}``. The template used for a job is chosen
by the job's first observation id (``(id - 1) % len``), so a re-run after a crash submits the same
decision. In a template, the string ``"$EVIDENCE"`` (as a whole ``evidence`` value) becomes every
current evidence handle, and ``{first}`` inside strings becomes the first observation id. With ``COMMON_MEMORY_AGENT_CALLS``
set, every agent call appends the job id to that file, so tests can prove recovery made no call.
"""

from __future__ import annotations

import json
import os

from cmrunner.writer_proc.port import ScriptedPort
from cmrunner.writer_proc.reads import ReadPort

SCRIPT_ENV = "COMMON_MEMORY_AGENT_SCRIPT"
CALLS_ENV = "COMMON_MEMORY_AGENT_CALLS"  # optional: append one line per agent call (the job id)


def _fill(value: object, first: int, evidence: list[str]) -> object:
    if isinstance(value, dict):
        return {k: (evidence if k == "evidence" and v == "$EVIDENCE" else _fill(v, first, evidence)) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, first, evidence) for v in value]
    if isinstance(value, str):
        return value.replace("{first}", str(first))
    return value


def from_environment() -> ScriptedPort | None:
    path = os.environ.get(SCRIPT_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as handle:
        templates = json.load(handle)["decisions"]

    calls = os.environ.get(CALLS_ENV)

    def script(task: dict, reads: ReadPort) -> object:
        if calls:
            with open(calls, "a", encoding="utf-8") as log:
                log.write(task["request_id"] + "\n")
        evidence = sorted((s.evidence_ref for s in reads.sources.values() if not s.context_only),
                          key=lambda h: int(h[3:]))
        first = int(evidence[0][3:]) if evidence else 0
        body = _fill(templates[(first - 1) % len(templates)], first, evidence)
        return {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": body}

    return ScriptedPort(script)
