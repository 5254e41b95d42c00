"""The Writer: one claimed job from queue to committed Markdown.

Contract, per ``run_once``:
1. Under the repository lock, recover interrupted commits (``commit.recover``) if any exist.
2. ``BEGIN IMMEDIATE``: claim a job (``jobs.claim``) — or return ``None`` when nothing is runnable.
3. Before any network call, with the job's lease: scope, provenance and project authorization
   of every observation the job holds, and one scope and class among them (else the whole job is
   quarantined), then ``shaping.shape``: per-observation scan and byte
   caps (only the offending observation is isolated), context turns, and the total cap and the
   request budget beside the snapshot's documents (trailing whole turns go back to pending; what
   fits no request is ``SOURCE_TOO_LARGE``). Nothing is sent for what was isolated.
4. With the snapshot read before shaping, the agent runs with no lock held, reading through the ``ReadPort``
   tools; a background thread renews the lease every ``leaseMs / 3`` and stops the attempt's
   writes from committing once the lease is lost.
   The agent reads the snapshot as a reader would (``shown.view``: a section already flagged as
   holding a secret is a placeholder), so such a section never blocks a decision about another.
   A document cm cannot parse now (``BLOCKING``: a hand edit it cannot read, or one over its
   budget) is not read: the manifest lists it ``blocked``, a decision may only append to it, and
   such decisions wait (``apply.split_blocked``, with every decision sharing their evidence):
   their observations move to a dead job whose cause names the document and line
   (``jobs.hold_back``; ``cm fix`` retries it), and the rest of the job commits. When everything
   waits, the attempt fails with the document's cause, not retryable: the job is dead.
5. The accepted decision is rendered on the real snapshot, checked again (sections, the sensitive
   content of what it writes, watermarks), a receipt is built and ``commit.commit`` publishes it.
Spend caps (``cmrunner.core.spend``): nothing is claimed while a cap is reached (``gate``); an
attempt whose next request meets a cap ends with ``SPEND_CAP_REACHED`` and its job is deferred
(``jobs.defer``: waiting, never dead), outcome ``waiting``. Every request of an attempt is metered
(``meter.Meter``: the ledger row, the grant it went under: the scopes of its sources and documents
and its sources' provenance classes).
Failures become job outcomes through ``jobs.fail`` (retry with backoff, dead, quarantined). A
lost lease is never recorded as anything: the job belongs to whoever holds it now. Anything else a
job provokes (not a ``CmError``) sets that job aside as dead with ``UNEXPECTED_FAILURE`` and its
class and ``file:line:function`` as the diagnostic (``cmrunner.core.poison``), so the drain goes
on with the rest; only a failure of the environment (``poison.transient``) escapes. While an
attempt runs, ``holding`` is the claimed job; if such a failure escapes, it stays set so the
drain can give the job back (``drain.WriterConsumer.abandon``). Claims, outcomes and
timings go to the drain log (ids, codes and numbers only).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cmrunner.agentrt.interface import AgentError, MemoryAgentPort
from cmrunner.agentrt.meter import Grant, Meter
from cmrunner.capture import observations
from cmrunner.core import (
    config as config_mod,
    directives,
    history,
    ledger,
    poison,
    projects,
    reasons,
    records,
    sections,
    spend,
    store,
)
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import Document
from cmrunner.writer_proc import apply, commit, contract, drainlog, housekeeping, jobs, shaping, shown as shown_mod
from cmrunner.writer_proc.port import build_task
from cmrunner.writer_proc.reads import ReadPort, Source
from cmrunner.writer_proc.tools import Toolbox

log = drainlog.get("writer")
_NO_REMOTE = {"baseUrl": "", "model": "scripted", "api": "none"}  # a scripted agent sends nothing to meter
# What a hand edit can do to one document that blocks only the decisions writing it.
BLOCKING = frozenset({"INVALID_DOCUMENT", "DOCUMENT_TOO_LARGE", "FILE_TOO_LARGE"})


def _now() -> int:
    return int(time.time() * 1000)


class Outcome:
    """What one ``run_once`` did: ``committed``, ``ignored``, ``retry``, ``dead``, ``quarantined``, ``stale``
    or ``waiting`` (a spend cap was reached); ``code`` is the job's issue and ``cause`` its one-line
    form with where the model's last rejection went wrong (``reasons.cause``), as ``cm status`` shows it."""

    __slots__ = ("job_id", "state", "code", "cause")

    def __init__(self, job_id: str, state: str, code: str | None = None, cause: str | None = None) -> None:
        self.job_id = job_id
        self.state = state
        self.code = code
        self.cause = cause if cause is not None else code

    def __repr__(self) -> str:
        return f"Outcome({self.job_id[:8]}, {self.state}, {self.code})"


class _Renewer(threading.Thread):
    """Renews the lease every ``leaseMs/3`` on its own connection until stopped or lost."""

    def __init__(self, paths: DataPaths, job: jobs.Job, lease_ms: int) -> None:
        super().__init__(daemon=True)
        self.paths, self.job, self.lease_ms = paths, job, lease_ms
        self.stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        conn = store.connect(self.paths.db, store.DRAIN_BUSY_MS)
        try:
            while not self.stop_event.wait(self.lease_ms / 3000):
                with store.immediate(conn):
                    if not jobs.renew(conn, self.job, _now(), self.lease_ms):
                        self.lost = True
                        return
        except CmError:
            self.lost = True
        finally:
            conn.close()


class Writer:
    def __init__(self, paths: DataPaths, cfg: config_mod.Config, port: MemoryAgentPort,
                 now: Callable[[], int] = _now, force: bool = False) -> None:
        self.paths = paths
        self.cfg = cfg
        self.port = port
        self.now = now
        self.scheduler = cfg.scheduler
        self.force = force
        self.conn = store.open_store(paths)
        self.caps = spend.Caps.of(cfg.spend)
        self.holding: jobs.Job | None = None

    def gate(self) -> spend.Block | None:
        """The spend cap that holds every claim back now, if one is reached."""
        return spend.blocked(self.conn, self.caps, self.now())

    def close(self) -> None:
        self.conn.close()

    # -- the loop ---------------------------------------------------------------------------
    def run_once(self) -> Outcome | None:
        housekeeping.finish_interrupted(self.paths, self.conn, self.now)
        if self.gate() is not None:
            return None  # work waits for the cap's next window or a raised cap (module contract)
        with store.immediate(self.conn):
            job = jobs.claim(self.conn, self.scheduler, self.now(), self.force)
        if job is None:
            return None
        self.holding = job
        started = time.monotonic()
        log.info("job %s claimed (%s, attempt %d, %d observation(s))", job.id[:12], job.task_kind, job.attempts,
                 len(job.observation_ids))
        outcome = self._outcome(job)
        self.holding = None  # not in a ``finally``: after an unexpected exception the drain gives it back
        log.info("job %s %s%s in %d ms", job.id[:12], outcome.state, f" ({outcome.cause})" if outcome.cause else "",
                 (time.monotonic() - started) * 1000)
        return outcome

    def _outcome(self, job: jobs.Job) -> Outcome:
        try:
            return self._attempt(job)
        except CmError as exc:
            return self._failed(job, exc)
        except Exception as exc:
            if poison.transient(exc):
                raise  # the environment failed, not the job: the drain gives it back to retry
            # The job's own data provoked a cm bug: set it aside (dead, with where it surfaced) so
            # the drain goes on with the rest; it is never claimed again until `cm retry`.
            detail = poison.detail(exc)
            log.error("job %s failed unexpectedly: %s", job.id[:12], detail)
            return self._failed(job, CmError(poison.UNEXPECTED, detail), {"unexpected": detail})

    def _failed(self, job: jobs.Job, exc: CmError, unexpected: dict | None = None) -> Outcome:
        """Record the attempt's failure as the job's outcome (retry, dead, quarantined, waiting)."""
        if exc.code == "STALE_LEASE":
            return Outcome(job.id, "stale", exc.code)
        if exc.code == spend.CODE:
            with store.immediate(self.conn):
                jobs.defer(self.conn, job, exc.code, self.now())
            return Outcome(job.id, "waiting", exc.code)
        retryable = unexpected is None and getattr(exc, "retryable", exc.code not in jobs.NOT_RETRYABLE)
        diagnostic = unexpected or getattr(exc, "diagnostic", None)
        rejection = getattr(exc, "rejection", None)
        try:
            with store.immediate(self.conn):
                state, issue = jobs.fail(self.conn, job, exc.code, self.now(), retryable, diagnostic,
                                         getattr(exc, "retry_after_ms", None), rejection)
        except CmError as lost:
            if lost.code == "STALE_LEASE":
                return Outcome(job.id, "stale", lost.code)
            raise
        return Outcome(job.id, state, issue, reasons.cause(issue, exc.code, rejection))

    # -- one attempt ------------------------------------------------------------------------
    def _hold_back(self, job: jobs.Job, waits: apply.HeldBack, blocked: dict[str, CmError],
                   facts: apply.BatchFacts) -> apply.BatchFacts:
        """Set aside what waits for a broken document in a dead job of its own that names the
        document and its line (``cm fix`` revives it), and return the facts of what commits now;
        when everything waits, the attempt fails with the document's cause."""
        target = sorted(waits.targets)[0]
        cause = blocked[target]
        line = getattr(cause, "lineno", 0)
        rule = f"line {line}: {getattr(cause, 'rule', '')}" if line else str(getattr(cause, "rule", "") or cause.code)
        record = {"tool": "submit_memory_decision", "code": cause.code, "target": target, "rule": rule[:160]}
        rest = [i for i in facts.observation_ids if i not in waits.observation_ids]
        if not rest or job.task_kind == "edit":
            failed = CmError(cause.code, f"{cause.message}; the decisions for {target} wait for that fix")
            failed.retryable = False  # type: ignore[attr-defined]
            failed.rejection = record  # type: ignore[attr-defined]
            raise failed
        with store.immediate(self.conn):
            held_id = jobs.hold_back(self.conn, job, sorted(waits.observation_ids), cause.code, record, self.now())
        log.info("job %s: %d observation(s) wait for %s in job %s (%s)", job.id[:12], len(waits.observation_ids),
                 target, held_id[:12], cause.code)
        keep = set(rest)
        return apply.BatchFacts(rest, {i: facts.scopes[i] for i in keep}, {i: facts.observed_ms[i] for i in keep},
                                facts.links, facts.hand_edited, facts.edit_task)

    def _sources(self, job: jobs.Job) -> list[Source]:
        rows = observations.sources_of_job(self.conn, job.id)
        return [Source(*row) for row in rows if row[1] is not None]

    def _authorization_issue(self, job: jobs.Job) -> str | None:
        """Whole-batch checks, on every observation the job holds: may each one's scope and
        provenance be disclosed at all, and do they all share the job's one scope and class?"""
        disclosure = self.cfg.disclosure
        registered = {p.scope for p in projects.load(self.paths)}
        held = observations.classes(self.conn, observations.ids_of_job(self.conn, job.id))
        for scope, provenance in ((job.scope, job.provenance), *held):
            if scope not in disclosure.allowed_scopes:
                return "UNAUTHORIZED_SOURCE"
            if provenance not in disclosure.allowed_provenance:
                return "UNAUTHORIZED_PROVENANCE"
            if scope != "global" and scope not in registered:
                return "UNREGISTERED_PROJECT"
        if any(pair != (job.scope, job.provenance) for pair in held):
            return "MIXED_BATCH"
        return None

    def _snapshot(self, job: jobs.Job) -> tuple[dict[str, Document], dict[str, CmError]]:
        """The documents the agent reads, and those cm cannot parse now (``BLOCKING``): a broken
        file blocks only the decisions that would write it, never the job (module contract)."""
        allowed = self.cfg.allowed_scopes
        targets = ["profile", "preferences"] if "global" in allowed else []
        if job.scope != "global" and job.scope in allowed:
            targets.append(job.scope)
        docs: dict[str, Document] = {}
        blocked: dict[str, CmError] = {}
        for target in targets:
            try:
                docs[target] = commit.read_document(self.paths, target)
            except CmError as exc:
                if exc.code not in BLOCKING:
                    raise
                blocked[target] = exc
        return docs, blocked

    def _links(self, targets: list[str]) -> tuple[dict, dict]:
        """Current source links per target: key -> ids, and title-level import facts for the guard."""
        links: dict[str, dict[str, list[int]]] = {t: {} for t in targets}
        imports: dict[str, dict[str, int]] = {t: {} for t in targets}
        rows = records.links(self.conn)
        provenance = observations.provenances(self.conn, sorted({r[2] for r in rows}))
        for target, key, sid in rows:
            prov = provenance.get(sid)
            if target in links:
                links[target].setdefault(key, []).append(sid)
                if prov in ("agent_observation", "document_import"):
                    imports[target][key] = imports[target].get(key, 0) + 1
        return links, imports

    def _attempt(self, job: jobs.Job) -> Outcome:
        issue = self._authorization_issue(job)
        if issue is not None:
            with store.immediate(self.conn):
                jobs.quarantine(self.conn, job, issue, self.now())
            return Outcome(job.id, "quarantined", issue)
        snapshot, blocked = self._snapshot(job)  # read first: the documents share each request's budget with the sources
        shown = shown_mod.view(self.paths, snapshot)  # what the agent reads: flagged sections withheld
        documents = [d.data.decode("utf-8", "replace") for d in shown.values()]
        with store.immediate(self.conn):
            jobs.assert_lease(self.conn, job, self.now())
            shaped = shaping.shape(self.conn, self.cfg, job, self._sources(job), self.now(), documents)
            if not any(not s.context_only for s in shaped.sources):
                issue = next(iter(shaped.isolated.values()), "EMPTY_BATCH")
                jobs.quarantine(self.conn, job, issue, self.now())
        if issue is not None:
            return Outcome(job.id, "quarantined", issue)
        sources = shaped.sources
        links, import_counts = self._links(list(snapshot))
        versions = records.versions(self.conn)
        hand_edited = frozenset(t for t, d in snapshot.items()
                                if d.exists and versions.get(t) != d.hash)
        watermarks = {r[0]: (r[1], r[2] or 0) for r in records.watermarks(self.conn)}
        batch = observations.batch_of_job(self.conn, job.id)
        facts = apply.BatchFacts(
            [r[0] for r in batch], {r[0]: r[1] for r in batch}, {r[0]: apply.iso_to_ms(r[2]) for r in batch},
            links, hand_edited, job.task_kind == "edit",
        )
        writable = frozenset(self.cfg.writable_scopes)
        edit_scope = job.scope if job.task_kind == "edit" else None

        def accept(payload: object, reads: ReadPort) -> tuple[contract.ValidatedDecision, dict[str, Document]]:
            # By title, as the contract looks them up; a title a hand edit repeated has no entry, so
            # import evidence alone never replaces either of its sections.
            section_links = {
                t: {s.title: contract.SectionLinks(len(links[t].get(sections.unit_key(t, s), [])),
                                                   import_counts[t].get(sections.unit_key(t, s), 0))
                    for s in doc.sections if s.occurrence == 1 and doc.by_title(s.title) is s
                    and not any(o.title == s.title and o.occurrence > 1 for o in doc.sections)}
                for t, doc in snapshot.items()
            }
            # Lines already in each document, as the agent read them: the import kind rule judges only new text.
            known_lines = {t: directives.known_lines(d.data.decode("utf-8", "replace")) for t, d in shown.items()}
            ctx = contract.DecisionContext(
                job_id=job.id, batch_scope=job.scope,
                evidence={contract.evidence_handle(s.observation_id):
                          contract.EvidenceSource(s.scope, s.provenance, s.import_kind)
                          for s in sources if not s.context_only},
                writable_scopes=writable,
                snapshot={t: {s.ref: s.title for s in d.sections} for t, d in shown.items()},
                fully_read_targets=reads.fully_read_targets, ingest_fully_read=reads.ingest_fully_read,
                section_links=section_links, hand_edited_targets=hand_edited,
                edit_task=job.task_kind == "edit", edit_scope=edit_scope, known_lines=known_lines,
                blocked_targets=frozenset(blocked),
            )
            accepted = contract.validate_decision(payload, ctx)
            apply.check_watermarks(accepted, watermarks, facts)
            kept, waits = apply.split_blocked(accepted, frozenset(blocked), facts.observation_ids)
            rendered = apply.render(snapshot, kept)
            held[:] = [waits] if waits is not None else []
            return kept, rendered

        def check_lease() -> None:
            if renewer.lost:
                raise CmError("STALE_LEASE", "this job's lease was lost; its result is discarded")
            with store.immediate(self.conn):
                jobs.assert_lease(self.conn, job, self.now())

        held: list[apply.HeldBack] = []  # what the accepted submission could not write now
        writable_targets = frozenset(t for t in (*snapshot, *blocked) if contract.target_scope(t) in writable)
        reads = ReadPort(job.id, sources, shown, writable_targets, accept, check_lease,
                         {t: exc.code for t, exc in blocked.items()})
        grant = Grant(tuple(sorted({s.scope for s in sources} | {contract.target_scope(t) for t in snapshot})),
                      tuple(sorted({s.provenance for s in sources})))
        meter = Meter(self.conn, ledger.MEMORY_AGENT, self.cfg.remote or _NO_REMOTE, grant, self.caps, job.id,
                      job.attempts, self.now)
        renewer = _Renewer(self.paths, job, self.scheduler["leaseMs"])
        renewer.start()
        try:
            task = build_task(job.id, job.task_kind, reads)
            result = self.port.decide(task, Toolbox(reads, task["decision_schema"]), meter)
        finally:
            renewer.stop_event.set()
            renewer.join()
        # The receipt and history name the model that decided; an agent CLI's with the CLI's name.
        model_label = meter.model if meter.api != "agent-cli" else f"{meter.host}/{meter.model}"
        if reads.submission is None:
            raise AgentError("MISSING_SUBMISSION", "the agent ended without submitting a decision")
        accepted, changed = reads.submission
        with store.immediate(self.conn):
            jobs.record_activity(self.conn, job, result.model_turns, result.tool_calls,
                                 result.usage.get("input_tokens", 0), result.usage.get("output_tokens", 0))
        if held:
            facts = self._hold_back(job, held[0], blocked, facts)
        receipt = apply.build_receipt(job.id, snapshot, changed, accepted, facts, result.prompt_digest,
                                      model_label, result.usage, self.now())
        if changed:
            model = model_label
            first = next((s.observation_id for s in sources if not s.context_only), None)
            client, session = observations.captured_by(self.conn, first) if first is not None else (None, None)
            with store.immediate(self.conn):
                history.stage(self.conn, job.id, snapshot, changed, apply.decision_kinds(snapshot, accepted),
                              history.Provenance(history.AGENT, client, session, model), self.now())
        commit.commit(self.paths, self.conn, job.id, lambda: jobs.assert_lease(self.conn, job, self.now()), snapshot,
                      changed, receipt, self.now)
        return Outcome(job.id, "committed" if changed else "ignored")
