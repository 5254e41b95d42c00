"""What a Memory Agent runtime and the Writer say to each other, defined on the runtime's side.

Contract:
- The Writer calls ``MemoryAgentPort.decide(task, tools, meter)`` once per attempt, with no lock
  held. ``tools`` (``JobTools``) is that job's tool handlers for this attempt: the Writer's
  ``writer_proc/tools.py:Toolbox`` over the job's read port, which validates every call and the
  submission. A runtime only relays calls to it: it never reads sources or documents itself
  except to scan what it is about to send (``outbound_texts``), and judges the attempt by
  ``tools.submitted``, never by what the model says.
- ``decide`` ends with one accepted submission and returns ``AgentResult``, or raises
  ``AgentError`` (a ``CmError`` with ``retryable``, a sanitised ``diagnostic``, and optionally
  ``retry_after_ms`` and ``rejection``); returning without a submission is ``MISSING_SUBMISSION``.
- ``ToolOutcome`` is one call's answer: the JSON result for the model, whether the call was
  rejected, whether it was the accepted submission, the rejection's code and the record the job
  keeps of it (codes and bounded names, never text).
- ``TOOL_NAMES`` are the Memory Agent's tools, the vocabulary both sides share: the Writer's
  handlers answer exactly these, and an agent CLI is allowed exactly these by name. ``SUBMIT`` is
  the one a runtime must single out: its acceptance ends the attempt, and a runtime counts its
  rejections (``agent.MAX_REJECTED_SUBMISSIONS``).

Why here: the runtimes sit below the Writer and never import it; the Writer hands them its tool
handlers through this protocol instead. The handlers stay in the Writer's room because they are the
decision contract's front door (coverage, fencing, validation against the snapshot), not a
runtime's concern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cmrunner.core.errors import CmError

if TYPE_CHECKING:
    from cmrunner.agentrt.meter import Meter

SUBMIT = "submit_memory_decision"
TOOL_NAMES = ("inspect_ingest", "read_ingest", "inspect_memory", "processing_state", "record_working_notes", SUBMIT)


class AgentError(CmError):
    """An attempt failed; ``retryable``, ``diagnostic`` and ``retry_after_ms`` (the provider's
    ``Retry-After``, the least wait before the next attempt) decide the job's outcome;
    ``rejection`` is the last tool rejection the model received in the attempt, if any
    (``ToolOutcome.record``), which the job keeps as the real cause."""

    def __init__(self, code: str, message: str, retryable: bool = True, diagnostic: dict | None = None) -> None:
        super().__init__(code, message)
        self.retryable = retryable
        self.retry_after_ms: int | None = None
        self.rejection: dict | None = None
        self.diagnostic = diagnostic or {"stage": "model_output", "reason": code.lower(), "retryable": retryable}


class AgentResult:
    __slots__ = ("usage", "prompt_digest", "model_turns", "tool_calls")

    def __init__(self, usage: dict[str, int], prompt_digest: str, model_turns: int = 0, tool_calls: int = 0) -> None:
        self.usage = usage
        self.prompt_digest = prompt_digest
        self.model_turns = model_turns
        self.tool_calls = tool_calls


class ToolOutcome:
    __slots__ = ("result", "rejected", "submitted", "code", "record")

    def __init__(self, result: dict, rejected: bool = False, submitted: bool = False, code: str | None = None,
                 record: dict | None = None) -> None:
        self.result = result
        self.rejected = rejected
        self.submitted = submitted
        self.code = code
        self.record = record  # a rejection as the job keeps it (``tools.rejection_record``)


class JobTools(Protocol):
    """One job's Memory Agent tools for one attempt (the Writer's ``Toolbox``)."""

    @property
    def submitted(self) -> bool:
        """Whether a decision was accepted."""
        ...

    def definitions(self) -> list[dict]:
        """Name, description and JSON-Schema parameters of each tool, in a fixed order."""
        ...

    def call(self, name: str, raw_arguments: str) -> ToolOutcome:
        """Run one call; raises ``CmError`` only for what ends the attempt (a lost lease, a
        submission whose result fails the sensitive-content check)."""
        ...

    def outbound_texts(self) -> list[str]:
        """Every source and snapshot document text the model could be shown, for the scan before
        anything is sent."""
        ...

    def check_lease(self) -> None:
        """Raise ``STALE_LEASE`` when the job's lease was lost."""
        ...


class MemoryAgentPort(Protocol):
    def decide(self, task: dict, tools: JobTools, meter: Meter) -> AgentResult: ...
