"""The read capabilities a Memory Agent gets for one job, and the submission tool.

Contract:
- The agent sees handles, never raw source text or Markdown in its task: ``inspect_ingest``
  pages block descriptors (``MANIFEST_PAGE`` per page), ``read_ingest`` and ``inspect_memory`` page
  bytes (``BULK_PAGE`` per page, sized to a job rather than the reference's 8 KiB, always ending
  on a UTF-8 boundary).
- The first read returns everything the job holds when it fits: the attempt's first call of any
  read tool (``inspect_ingest``, ``read_ingest`` of a block or the bulk read from offset 0,
  ``inspect_memory`` of the manifest or a target) adds, when every source and every document
  together fit ``BULK_PAGE`` bytes, ``complete: true``, ``sources`` (every block's compact
  descriptor with its whole text, as the bulk read gives them; the bulk read's own ``blocks``
  already are) and ``memory`` (the manifest's documents, each with its whole text; the manifest's
  own ``documents`` already are), and marks all of it read. So a job is read in one call,
  whatever tool the model starts with; a larger job is paged as before.
- Bulk reads save round trips without weakening coverage: ``read_ingest_all`` (the tool's
  ``handle: null``) serves every bundle in task order, block after block, as much text as fits
  ``BULK_PAGE`` bytes, with each block's compact descriptor; its ``offset``/``next`` count bytes
  across all blocks in that order, and a block split by a page boundary also carries its own
  ``offset``/``next``, so it may equally be read on with ``read_ingest``. The manifest (``inspect_memory`` without target) carries each
  document's text inline while the page's ``BULK_PAGE`` budget lasts, with ``next`` per document
  (null: read to the end; otherwise continue with that target's pages). Both are ordinary reads:
  they update the same per-block and per-document coverage and obey the same contiguity rule.
- Reads are contiguous: an offset must sit on a character boundary and may not skip bytes not
  read yet (``NONCONTIGUOUS_READ``), so "read to the end" really means every byte was served.
- Coverage is tracked here and handed to the decision contract: every current source block must be
  read to its end before a submission is accepted (``INCOMPLETE_INGEST_COVERAGE``), and every
  edited document must have been read to its end (``UNREAD_MEMORY_TARGET``).
- Every call first checks the job's lease through ``check_lease``; a lost lease ends the attempt.
- ``submit`` hands the payload to the Writer's ``accept`` (the decision contract, then the
  rendered documents' checks) and keeps the first accepted submission; later calls raise
  ``DECISION_ALREADY_SUBMITTED``.
Errors are ``ReadRejected`` (a ``CmError``) naming only handles, fields and codes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from cmrunner.core import importkinds
from cmrunner.core.errors import CmError
from cmrunner.core.sections import Document, Section
from cmrunner.writer_proc import contract

# What the Writer's ``accept`` returns for a valid submission: the decision and the rendered documents.
Accepted = tuple[contract.ValidatedDecision, dict[str, Document]]

MANIFEST_PAGE = 32
# Every page is sized to a job, not to the reference's 8 KiB: the Writer sizes each job so that its
# sources fit one such page (``budget.JOB_SOURCE_BYTES``), so a block or a document is one read
# however the model pages, and no request grows past what the bulk read already sends.
BULK_PAGE = 65536  # generous: one page holds a whole ordinary batch, or all documents up to their hard budgets


class ReadRejected(CmError):
    """A read tool call was refused; the agent may correct it and continue."""


class Source:
    """One block the agent may read: a current observation (evidence) or context only.

    Context blocks are assistant/tool text and earlier turns of the same session and scope. They
    carry no evidence handle, so a decision can never cite them. ``required`` context (the current
    turns' own replies) must be read before submitting; older turns are optional.
    """

    __slots__ = ("observation_id", "text", "scope", "provenance", "source", "observed_at", "data",
                 "context_key", "role", "turn", "required", "import_kind")

    def __init__(self, observation_id: int, text: str, scope: str, provenance: str, source: str,
                 observed_at: str, context_key: str | None = None, role: str = "user", turn: str | None = None,
                 required: bool = True) -> None:
        self.observation_id = observation_id
        self.text = text
        self.scope = scope
        self.provenance = provenance
        self.source = source
        self.observed_at = observed_at
        self.data = text.encode("utf-8")
        self.context_key = context_key
        self.role = role
        self.turn = turn
        self.required = required
        # What an imported file is (``importkinds``), from its part's envelope; None for other sources.
        self.import_kind = importkinds.of_envelope(text) if provenance == "document_import" else None

    @property
    def context_only(self) -> bool:
        return self.context_key is not None

    @property
    def handle(self) -> str:
        return f"context_{self.context_key}" if self.context_only else f"ingest_{self.observation_id}"

    @property
    def evidence_ref(self) -> str | None:
        return None if self.context_only else contract.evidence_handle(self.observation_id)

    def descriptor(self) -> dict:
        metadata = {"source": self.source, "provenance": self.provenance, "scope": self.scope,
                    "observed_at": self.observed_at, "role": self.role}
        if self.turn is not None:
            metadata["turn_id"] = self.turn
        return {
            "block_id": "b1", "parent_id": None, "kind": "conversation" if self.context_only else "text", "order": 0,
            "bytes": len(self.data), "context_only": self.context_only, "required": self.required,
            "evidence_ref": self.evidence_ref, "metadata": metadata,
        }

    def compact(self) -> dict:
        """The descriptor a bulk page carries: what the task's bundle entry does not already say, and
        what deciding needs (``inspect_ingest`` has the full descriptor, with ``observed_at``)."""
        entry: dict = {"handle": self.handle, "block_id": "b1", "evidence_ref": self.evidence_ref, "role": self.role}
        if self.turn is not None:
            entry["turn_id"] = self.turn
        return entry


def _page(data: bytes, offset: int, covered: int, size: int | None = None) -> tuple[bytes, int]:
    """The page of ``data`` starting at ``offset`` (at most ``size`` bytes, ``BULK_PAGE`` by
    default); checks boundaries and contiguity."""
    size = BULK_PAGE if size is None else size
    if offset < 0 or offset > len(data) or (offset < len(data) and (data[offset] & 0xC0) == 0x80):
        raise ReadRejected("INVALID_PAGE_OFFSET", "offset must be a character boundary inside the content")
    if offset > covered:
        raise ReadRejected("NONCONTIGUOUS_READ", f"read from offset {covered} first; bytes may not be skipped")
    end = min(len(data), offset + size)
    while end < len(data) and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[offset:end], end


def _unit(section: Section) -> dict:
    """A unit as the manifest lists it: the untitled text before the first section and the second
    section of a title say so, so the agent can tell them apart."""
    entry: dict = {"ref": section.ref, "title": section.title}
    if section.untitled:
        entry["untitled"] = True
    elif section.occurrence > 1:
        entry["occurrence"] = section.occurrence
    return entry


class ReadPort:
    """The read tools of one attempt (see module contract)."""

    def __init__(self, job_id: str, sources: list[Source], snapshot: Mapping[str, Document],
                 writable: frozenset[str], accept: Callable[[object, ReadPort], Accepted],
                 check_lease: Callable[[], None], blocked: Mapping[str, str] | None = None) -> None:
        self.job_id = job_id
        self.blocked = dict(blocked or {})  # target -> the code that keeps cm from reading it now
        self.sources = {s.handle: s for s in sources}
        self.snapshot = dict(snapshot)
        self.snapshot_handle = "snapshot_" + os.urandom(8).hex()
        self.writable = writable
        self._accept = accept
        self._check_lease = check_lease
        self._ingest_covered = {h: 0 for h in self.sources}
        self._memory_covered = {t: 0 for t in self.snapshot}
        self._first_read_done = False
        self.everything_served = False  # a read returned every source and document (``complete``)
        self.submission: Accepted | None = None

    # -- coverage --------------------------------------------------------------------------
    @property
    def ingest_fully_read(self) -> bool:
        return all(self._ingest_covered[h] >= len(s.data) for h, s in self.sources.items() if s.required)

    @property
    def fully_read_targets(self) -> frozenset[str]:
        return frozenset(t for t, doc in self.snapshot.items() if self._memory_covered[t] >= len(doc.data))

    def check_lease(self) -> None:
        """Raise ``STALE_LEASE`` if this job's lease is lost (a runtime polls it between calls)."""
        self._check_lease()

    def _guard(self) -> None:
        if self.submission is not None:
            raise ReadRejected("DECISION_ALREADY_SUBMITTED", "a decision was already accepted for this job")
        self._check_lease()

    # -- tools -----------------------------------------------------------------------------
    def inspect_ingest(self, handle: str, offset: int = 0) -> dict:
        self._guard()
        source = self.sources.get(handle)
        if source is None:
            raise ReadRejected("INVALID_INGEST_HANDLE", "unknown ingest handle; use the handles from the task")
        if offset != 0:
            raise ReadRejected("INVALID_PAGE_OFFSET", "this bundle has a single manifest page; use offset 0")
        return self._first({"handle": handle, "offset": 0, "next": None, "blocks": [source.descriptor()]})

    def read_ingest(self, handle: str, block: str, offset: int = 0) -> dict:
        self._guard()
        source = self.sources.get(handle)
        if source is None:
            raise ReadRejected("INVALID_INGEST_HANDLE", "unknown ingest handle; use the handles from the task")
        if block != "b1":
            raise ReadRejected("INVALID_BLOCK_REFERENCE", "unknown block; use the block ids from inspect_ingest")
        chunk, end = _page(source.data, offset, self._ingest_covered[handle])
        self._ingest_covered[handle] = max(self._ingest_covered[handle], end)
        return self._first({"handle": handle, "block": block, "offset": offset, "bytes": len(chunk),
                            "text": chunk.decode("utf-8"), "next": end if end < len(source.data) else None,
                            "descriptor": source.descriptor()})

    def read_ingest_all(self, offset: int = 0) -> dict:
        """One bulk page over every bundle in task order (see module contract)."""
        self._guard()
        total = sum(len(s.data) for s in self.sources.values())
        if offset < 0 or offset > total:
            raise ReadRejected("INVALID_PAGE_OFFSET", "offset must be 0 or the 'next' of the previous bulk page")
        blocks, position = self._bulk_blocks(offset)
        return self._first({"offset": offset, "next": position if position < total else None, "blocks": blocks},
                           has_sources=True)

    def _bulk_blocks(self, offset: int) -> tuple[list[dict], int]:
        """The blocks of one bulk page from ``offset`` (coverage updated) and where the page ends."""
        order = list(self.sources.values())
        index, local = 0, offset
        while index < len(order) and local >= len(order[index].data) and (local > 0 or order[index].data):
            local -= len(order[index].data)
            index += 1
        blocks: list[dict] = []
        budget, position = BULK_PAGE, offset
        while index < len(order):
            source = order[index]
            chunk, end = _page(source.data, local, self._ingest_covered[source.handle], budget)
            if not chunk and end < len(source.data):
                break  # not even one character fits what is left of this page
            self._ingest_covered[source.handle] = max(self._ingest_covered[source.handle], end)
            entry = source.compact()
            if local or end < len(source.data):
                entry.update({"offset": local, "next": end if end < len(source.data) else None})
            entry["text"] = chunk.decode("utf-8")
            blocks.append(entry)
            budget -= len(chunk)
            position += len(chunk)
            if end < len(source.data):
                break
            index, local = index + 1, 0
        return blocks, position

    def _manifest(self) -> list[dict]:
        """The manifest's documents, with their text while ``BULK_PAGE`` lasts (coverage updated)."""
        documents, budget = [], BULK_PAGE
        for t, listed in self.snapshot.items():
            entry: dict = {"target": t, "hash": listed.hash, "bytes": len(listed.data), "writable": t in self.writable,
                           "sections": [_unit(s) for s in listed.sections],
                           "soft_budget_bytes": listed.budgets.soft, "hard_budget_bytes": listed.budgets.hard}
            chunk, end = _page(listed.data, 0, 0, budget) if budget > 0 else (b"", 0)
            if chunk or not listed.data:
                self._memory_covered[t] = max(self._memory_covered[t], end)
                budget -= len(chunk)
                entry.update({"text": chunk.decode("utf-8"), "next": end if end < len(listed.data) else None})
            else:
                entry["next"] = 0
            documents.append(entry)
        for t, code in self.blocked.items():
            documents.append({"target": t, "blocked": code, "writable": t in self.writable, "sections": [],
                              "text": "", "next": None})
        return documents

    def _first(self, result: dict, has_sources: bool = False, has_memory: bool = False) -> dict:
        """``result``, plus everything the job holds when this is the attempt's first read and it all
        fits one page (module contract)."""
        if self._first_read_done:
            return result
        self._first_read_done = True
        held = sum(len(s.data) for s in self.sources.values()) + sum(len(d.data) for d in self.snapshot.values())
        if held > BULK_PAGE:
            return result
        if not has_sources:
            result["sources"] = self._bulk_blocks(0)[0]
        if not has_memory:
            result["memory"] = self._manifest()
        result["complete"] = True
        self.everything_served = True
        return result

    def inspect_memory(self, handle: str, target: str | None = None, offset: int = 0) -> dict:
        self._guard()
        if handle != self.snapshot_handle:
            raise ReadRejected("INVALID_SNAPSHOT_HANDLE", "unknown snapshot handle; use the one from the task")
        if target is None:
            return self._first({"handle": handle, "documents": self._manifest()}, has_memory=True)
        doc = self.snapshot.get(target)
        if doc is None:
            raise ReadRejected("INVALID_TARGET_REFERENCE", "that target is not in this snapshot")
        chunk, end = _page(doc.data, offset, self._memory_covered[target])
        self._memory_covered[target] = max(self._memory_covered[target], end)
        return self._first({"handle": handle, "target": target, "offset": offset, "bytes": len(chunk),
                            "text": chunk.decode("utf-8"), "next": end if end < len(doc.data) else None})

    def processing_state(self) -> dict:
        self._guard()
        total = sum(len(s.data) for s in self.sources.values() if s.required)
        read = sum(min(self._ingest_covered[h], len(s.data)) for h, s in self.sources.items() if s.required)
        return {"complete": read >= total, "read_bytes": read, "total_bytes": total}

    def submit(self, payload: object) -> dict:
        """Validate a decision with the Writer's ``accept`` (contract, then the rendered result)."""
        self._guard()
        self.submission = self._accept(payload, self)
        return {"submitted": True, "committed": False}
