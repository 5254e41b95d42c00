"""The Memory Agent's function tools: definitions for the model and sanitised execution.

Contract:
- ``definitions(decision_schema)`` lists exactly ``inspect_ingest``, ``read_ingest``,
  ``inspect_memory``, ``processing_state``, ``record_working_notes`` and ``submit_memory_decision``
  with strict-mode parameter schemas (every property required, optional ones nullable, no extra
  properties); the submission's parameters are the task's decision schema. ``read_ingest`` with
  ``handle`` and ``block`` both null is the bulk read (``ReadPort.read_ingest_all``); one of them
  null without the other is ``INVALID_BLOCK_REFERENCE``.
- ``Toolbox`` is the runtimes' ``cmrunner.agentrt.interface.JobTools``: the Writer builds one per
  attempt and hands it to the runtime, which only relays calls to it.
- ``Toolbox.call(name, raw_arguments)`` runs one call against the job's ``ReadPort`` and returns a
  ``ToolOutcome``: the JSON result for the model, whether it was rejected, and whether a decision
  was accepted. Rejections come back as ``{error: MEMORY_TOOL_REJECTED, tool, code,
  schema_errors?, hint}`` where ``code`` is an UPPER_SNAKE code, ``schema_errors`` hold only JSON
  paths of known fields and rule names, and ``hint`` is fixed text per code: no argument value, no
  source text and no exception message is ever echoed. ``ToolOutcome.record`` is what the job keeps
  of a rejection (``rejection_record``: the tool, the code and bounded rule, path, document,
  section heading and fingerprint fields; never a value), so ``cm status`` can name the cause.
- Arguments are parsed within ``boundedjson``'s bounds: nesting deeper than
  ``limits.JSON_MAX_DEPTH`` is rejected as ``TOOL_ARGUMENTS_INVALID`` (rule ``maxDepth``), like
  any other unparsable arguments, so the model may correct itself and the replayed call is blank.
- Once a read returned everything the job holds (``complete``), every later valid read in the
  attempt answers ``ALREADY_RETURNED`` instead of the same text again (after the same checks, so a
  bad handle is still rejected): a model that asks for sources and memory at once, or twice, does
  not carry every document twice in each request that follows, since the text is already in its
  conversation (issue 35: the parallel-calling style cost 12% more per turn than the serial one).
- The first accepted submission ends the tool loop; a later call in the same turn is not run.
- Failures that end the attempt propagate as exceptions: a lost lease (``STALE_LEASE``) and a
  submission whose result fails the sensitive-content check (not recoverable in-agent).
"""

from __future__ import annotations

import re

from cmrunner.agentrt import boundedjson, limits
from cmrunner.agentrt.interface import SUBMIT, TOOL_NAMES, ToolOutcome
from cmrunner.core.errors import CmError
from cmrunner.secrets import safety
from cmrunner.writer_proc import contract
from cmrunner.writer_proc.reads import BULK_PAGE, ReadPort

NOTES_LIMIT = 16 * 1024
ARGUMENTS_LIMIT = limits.TOOL_ARGUMENTS_LIMIT
_CODE = re.compile(r"^[A-Z][A-Z0-9_]{1,63}$")
ABORTING_CODES = frozenset({"STALE_LEASE", "SENSITIVE_CONTENT_REJECTED"})
READS = frozenset({"inspect_ingest", "read_ingest", "inspect_memory"})
ALREADY_RETURNED = {"already_returned": "an earlier read returned every source and document of this job", "next": None}

_HINTS = {
    "UNKNOWN_TOOL": "use only the tools listed in this request",
    "TOOL_ARGUMENTS_INVALID": "send a JSON object with exactly the parameters this tool declares",
    "INVALID_INGEST_HANDLE": "use an ingest_id from the task's bundles",
    "INVALID_BLOCK_REFERENCE": "use a block_id returned by inspect_ingest, or null handle and block to read all",
    "INVALID_SNAPSHOT_HANDLE": "use the snapshot handle from the task",
    "INVALID_TARGET_REFERENCE": "use a target or section ref from the snapshot manifest",
    "INVALID_PAGE_OFFSET": "use offset 0 or the 'next' value of the previous page",
    "NONCONTIGUOUS_READ": "continue from the 'next' value of the last page you read; bytes may not be skipped",
    "INCOMPLETE_INGEST_COVERAGE": "read every block of every bundle to the end (see processing_state), then submit",
    "UNREAD_MEMORY_TARGET": "read the whole target document with inspect_memory before editing it",
    "INVALID_DECISION": "the submission does not match the decision schema at the listed paths",
    "INVALID_REQUEST_REFERENCE": "copy request_id from the task exactly",
    "UNSAFE_CHARACTER": "titles and bodies may not hold control characters other than tab and newline, carriage "
                        "returns, bidirectional overrides or isolates, or U+2028/U+2029; remove them and submit again",
    "DECISION_ALREADY_SUBMITTED": "a decision was already accepted; stop calling tools",
    "IMPORT_INSTRUCTION_IN_PROFILE": "from an import, profile takes only facts about the person; move the instruction "
                                     "to an agent at the listed path to preferences, keep the facts, and submit again",
    "IMPORT_KIND_WRONG_TARGET": "write an import only to the documents its bundle's may_become lists; a checked-in "
                                "project file goes to the project's document, never to profile or preferences",
}


def _params(properties: dict[str, dict]) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# Descriptions are terse on purpose: every request re-sends them, and memory_agent.md explains the protocol.
_HANDLE = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_OFFSET = {"type": ["integer", "null"]}
_KIB = BULK_PAGE // 1024


def definitions(decision_schema: dict) -> list[dict]:
    """Name, description and JSON-Schema parameters of each tool, in a fixed order."""
    return [
        {"name": "inspect_ingest", "parameters": _params({"handle": _HANDLE, "offset": _OFFSET}),
         "description": "A bundle's block descriptors."},
        {"name": "read_ingest", "parameters": _params({"handle": _NULLABLE_TEXT, "block": _NULLABLE_TEXT,
                                                       "offset": _OFFSET}),
         "description": f"Source text, {_KIB} KiB pages; null handle and block: all bundles."},
        {"name": "inspect_memory",
         "parameters": _params({"handle": _HANDLE, "target": _NULLABLE_TEXT, "offset": _OFFSET}),
         "description": "Manifest with texts (target null), or one document."},
        {"name": "processing_state", "parameters": _params({}), "description": "Required bytes read."},
        {"name": "record_working_notes", "parameters": _params({"notes": {"type": "string"}}),
         "description": "Replace private notes."},
        {"name": SUBMIT, "parameters": decision_schema,
         "description": "The first valid one ends the task."},
    ]


# What a job may keep of a rejection (``jobs.rejection``), each value bounded: codes, rule names
# or fixed rule phrases, a JSON path of known fields, a document name, a section heading that
# passed the scanner (``apply.render``) and a finding's fingerprint. Never a value or any text.
_RECORD_FIELDS = {"rule": 160, "path": 160, "target": 200, "section": 120, "fingerprint": 16}


def rejection_record(tool: str, code: str, details: dict | None = None) -> dict:
    """The sanitised record of one rejection: ``{tool, code}`` plus the bounded string fields of
    ``details`` that ``_RECORD_FIELDS`` allows."""
    record = {"tool": tool if tool in TOOL_NAMES else "unknown", "code": code if _CODE.match(code) else "TOOL_REJECTED"}
    for name, limit in _RECORD_FIELDS.items():
        value = (details or {}).get(name)
        if isinstance(value, str) and value and len(value) <= limit:
            record[name] = value
    return record


def rejection(tool: str, code: str, schema_errors: list[dict] | None = None, details: dict | None = None) -> ToolOutcome:
    code = code if _CODE.match(code) else "TOOL_REJECTED"
    result: dict = {"error": "MEMORY_TOOL_REJECTED", "tool": tool if tool in TOOL_NAMES else "unknown", "code": code}
    if schema_errors:
        result["schema_errors"] = schema_errors[:12]
    result["hint"] = _HINTS.get(code, "correct the call and try again")
    return ToolOutcome(result, rejected=True, code=code, record=rejection_record(tool, code, details))


def _argument_errors(args: dict, spec: dict) -> list[dict]:
    errors = []
    properties = spec["properties"]
    for name in args:
        if name not in properties:
            errors.append({"path": "$", "rule": "additionalProperties"})
    for name, prop in properties.items():
        kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        if name not in args:
            if "null" not in kinds:
                errors.append({"path": f"$.{name}", "rule": "required"})
            continue
        value = args[name]
        ok = ((value is None and "null" in kinds) or (isinstance(value, str) and "string" in kinds)
              or (isinstance(value, int) and not isinstance(value, bool) and "integer" in kinds and value >= 0))
        if not ok:
            errors.append({"path": f"$.{name}", "rule": "type"})
    return errors


class Toolbox:
    """Executes the model's tool calls for one attempt."""

    def __init__(self, reads: ReadPort, decision_schema: dict) -> None:
        self.reads = reads
        self._definitions = definitions(decision_schema)
        self.specs = {d["name"]: d["parameters"] for d in self._definitions}
        self.notes = ""
        self.submitted = False

    def definitions(self) -> list[dict]:
        return self._definitions

    def outbound_texts(self) -> list[str]:
        texts = [s.text for s in self.reads.sources.values()]
        return texts + [doc.data.decode("utf-8", "replace") for doc in self.reads.snapshot.values()]

    def check_lease(self) -> None:
        self.reads.check_lease()

    def call(self, name: str, raw_arguments: str) -> ToolOutcome:
        if name not in TOOL_NAMES:
            return rejection(name, "UNKNOWN_TOOL")
        try:
            args = boundedjson.loads(raw_arguments, ARGUMENTS_LIMIT) if raw_arguments.strip() else {}
        except boundedjson.JsonRejected as exc:
            rule = {"too_deep": "maxDepth", "too_large": "maxLength"}.get(exc.reason, "json")
            return rejection(name, "TOOL_ARGUMENTS_INVALID", [{"path": "$", "rule": rule}])
        if not isinstance(args, dict):
            return rejection(name, "TOOL_ARGUMENTS_INVALID", [{"path": "$", "rule": "type"}])
        if self.submitted:
            return rejection(name, "DECISION_ALREADY_SUBMITTED")
        if name == SUBMIT:
            return self._submit(args)
        errors = _argument_errors(args, self.specs[name])
        if errors:
            return rejection(name, "TOOL_ARGUMENTS_INVALID", errors)
        served = self.reads.everything_served
        try:
            result = self._read(name, args)
        except CmError as exc:
            if exc.code in ABORTING_CODES:
                raise
            return rejection(name, exc.code)
        return ToolOutcome(dict(ALREADY_RETURNED) if served and name in READS else result)

    def _read(self, name: str, args: dict) -> dict:
        offset = args.get("offset") or 0
        if name == "inspect_ingest":
            return self.reads.inspect_ingest(args["handle"], offset)
        if name == "read_ingest":
            handle, block = args.get("handle"), args.get("block")
            if handle is None or block is None:
                if handle is not None or block is not None:
                    raise CmError("INVALID_BLOCK_REFERENCE", "handle and block are both given or both null")
                return self.reads.read_ingest_all(offset)
            return self.reads.read_ingest(handle, block, offset)
        if name == "inspect_memory":
            return self.reads.inspect_memory(args["handle"], args.get("target"), offset)
        if name == "processing_state":
            return self.reads.processing_state()
        notes = args["notes"]
        if len(notes.encode("utf-8")) > NOTES_LIMIT:
            raise CmError("NOTES_TOO_LARGE", "notes are limited to 16 KiB")
        if safety.scan_text(notes):
            raise CmError("SENSITIVE_NOTES_REJECTED", "notes may not hold sensitive content")
        self.notes = notes
        return {"recorded": True, "bytes": len(notes.encode("utf-8"))}

    def _submit(self, payload: dict) -> ToolOutcome:
        try:
            result = self.reads.submit(payload)
        except contract.DecisionRejected as exc:
            path, rule = exc.details.get("path"), exc.details.get("rule")
            errors = [{"path": path, "rule": rule}] if isinstance(path, str) and isinstance(rule, str) else None
            return rejection(SUBMIT, exc.code, errors, exc.details)
        except CmError as exc:
            if exc.code in ABORTING_CODES:
                raise
            return rejection(SUBMIT, exc.code)
        self.submitted = True
        return ToolOutcome(result, submitted=True)
