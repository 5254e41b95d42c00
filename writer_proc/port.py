"""The Memory Agent port: what the Writer asks of an agent, and a scripted agent for tests.

Contract:
- ``build_task`` makes the ``memory_task_v1`` the agent starts from: the job id as ``request_id``,
  bundle handles with sizes and provenance, the snapshot handle, and the decision schema — never
  source text or Markdown (the agent reads those through the ``ReadPort`` tools). An edit task also
  states its ``edit_result`` rule. A document import's bundle also names its ``import_kind``
  (``cmrunner.core.importkinds``; null for a file imported with ``cm import FILE``) and
  ``may_become``: the documents its content may go to.
- The port itself, ``AgentError`` and ``AgentResult`` are the runtimes' (``cmrunner.agentrt.interface``):
  the Writer calls ``decide(task, tools, meter)`` with the job's ``tools.Toolbox`` and its meter.
- ``ScriptedPort`` is a real agent loop without a model: it reads every source block and every
  document to the end through the Toolbox's read port, then submits what its script returns.
  Tests use it to drive the Writer.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from cmrunner.agentrt.interface import SUBMIT, AgentError, AgentResult, JobTools
from cmrunner.core import importkinds
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import contract
from cmrunner.writer_proc.reads import ReadPort, ReadRejected, Source
from cmrunner.writer_proc.tools import Toolbox, rejection_record

if TYPE_CHECKING:
    from cmrunner.agentrt.meter import Meter


# An edit task's one extra rule travels in its task, not in the instructions every job sends: the
# instructions stay byte-identical across all jobs (one provider cache prefix) and ordinary jobs do
# not pay for a rule they cannot use. The Writer enforces it either way (INVALID_EDIT_RESULT).
EDIT_RESULT_RULE = "`modified` exactly when a decision is not `ignore`"


def build_task(job_id: str, task_kind: str, reads: ReadPort) -> dict:
    task = {
        "version": "memory_task_v1",
        "task_kind": task_kind,
        "request_id": job_id,
        "now": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "bundles": [_bundle(s) for s in reads.sources.values()],
        "snapshot": {"handle": reads.snapshot_handle, "document_count": len(reads.snapshot)},
        "decision_schema": contract.decision_json_schema(task_kind == "edit"),
    }
    if task_kind == "edit":
        task["edit_result"] = EDIT_RESULT_RULE
    return task


def _bundle(s: Source) -> dict:
    bundle = {"ingest_id": s.handle, "source": s.source, "provenance": s.provenance, "scope": s.scope,
              "block_count": 1, "bytes": len(s.data), "state": "context" if s.context_only else "current",
              "required": s.required}
    if s.provenance == "document_import":
        bundle["import_kind"] = s.import_kind
        bundle["may_become"] = list(importkinds.may_become(s.import_kind))
    return bundle


Script = Callable[[dict, ReadPort], object]


class ScriptedPort:
    """An agent that reads everything, then submits ``script(task, reads)`` (a decision payload)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0
        self.rejections: list[str] = []

    def decide(self, task: dict, tools: JobTools, meter: Meter) -> AgentResult:
        assert isinstance(tools, Toolbox), "the Writer hands every port its Toolbox"
        reads = tools.reads
        self.calls += 1  # no model, so no request for the meter to check or record
        tool_calls = 0
        for bundle in task["bundles"]:
            manifest = reads.inspect_ingest(bundle["ingest_id"])
            tool_calls += 1
            for block in manifest["blocks"]:
                offset: int | None = 0
                while offset is not None:
                    offset = reads.read_ingest(bundle["ingest_id"], block["block_id"], offset)["next"]
                    tool_calls += 1
        handle = task["snapshot"]["handle"]
        for doc in reads.inspect_memory(handle)["documents"]:
            offset = 0
            while offset is not None:
                offset = reads.inspect_memory(handle, doc["target"], offset)["next"]
                tool_calls += 1
        payload = self.script(task, reads)
        try:
            reads.submit(payload)
        except (contract.DecisionRejected, ReadRejected, CmError) as exc:
            self.rejections.append(exc.code)
            error = AgentError(exc.code, "the scripted decision was rejected", retryable=True,
                               diagnostic={"stage": "core_validation", "reason": "core_rejected", "retryable": True})
            error.rejection = rejection_record(SUBMIT, exc.code, getattr(exc, "details", None))
            raise error from None
        digest = hashlib.sha256(b"scripted-port").hexdigest()
        return AgentResult({"input_tokens": 0, "output_tokens": 0}, digest, model_turns=1, tool_calls=tool_calls + 1)
