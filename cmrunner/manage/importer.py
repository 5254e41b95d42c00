"""``cm import <file.md>``: one trusted local Markdown file in, through the same Writer as user turns.

Contract (specification "Importing a Markdown file", reference-facts §3.3 and §7.2):
- The file is a regular ``.md``/``.markdown`` file, not a symbolic link, at most
  ``importplan.MAX_IMPORT_BYTES`` (``IMPORT_TOO_LARGE``), strict UTF-8 (a leading BOM is dropped)
  without NUL bytes, non-empty after trimming; CRLF becomes LF. Anything else is refused before
  queuing with ``FILE_NOT_FOUND``, ``UNSUPPORTED_FILE_TYPE``, ``INVALID_ENCODING`` or
  ``EMPTY_DOCUMENT``. Nothing is truncated.
- ``prepare`` plans the parts (``importplan``): a file whose envelope fits one job's sources
  (``budget.job_limit`` of ``remote.maxRequestBytes``, or a smaller explicit disclosure cap) is one
  ``document_import`` observation, part 1 of 1, as the reference imports it; a larger one becomes
  parts ``part-1`` … ``part-n`` cut between Markdown blocks, each its own observation, so every
  Writer job and request stays within its budget and the cost grows linearly with the file. A line
  too large for any part is ``SOURCE_TOO_LARGE`` (``IMPORT_CHUNK_TOO_LARGE`` under an explicit
  cap). Each part is a JSON envelope with a fixed key order holding the label, the declared author,
  for ``cm import --from`` the file's kind (``importKind``, ``cmrunner.core.importkinds``; absent
  for ``cm import FILE``), the file name, the content digest, the part's index and count, the heading path above it, its
  structural block index (headings, paragraphs, lists, quotes, tables, code, rules and HTML as
  1-based line ranges within the part from markdown-it-py, each with its heading path) and its text.
  The blocks are structure, not facts; ``--author user`` is still a document import.
- Identity is per section, per source and target scope (``importdelta``; the rows in
  ``import_sections``). The source is ``--label`` if given, else the file's real path
  (``source_key``); ``cm import --from`` passes each file's source label. The import id is
  ``md-<sha256(text)>``.
  - A source's first import plans the whole text, exactly as before sections existed: namespace
    ``import:["markdown","v2",importId,contextId]``, parts ``part-1`` …. The same text already
    queued under another name, label, author or kind is a duplicate: nothing new is queued and the
    first metadata stays (so parts queued before the envelope carried a kind are not imported
    again; a file imported before sections existed is such a duplicate when unchanged: its
    sections are then recorded; changed, it is imported whole once more, then per section).
  - Later imports of the source send only the sections whose text was not in its last import
    (``edited`` at a heading path that held other text, else ``added``), each whole, with every
    block's heading path from the file and an ``update`` key in each part's envelope; namespace
    ``import:["markdown","v2",importId,contextId,"update-<n>"]`` for the source's n-th import. A
    moved section is unchanged; a removed one is counted in the plan and never forgotten. No
    changed section: nothing is planned or queued, and the report shows the parts that carried
    this exact text before, if any.
  - The plan says what became of the parts that carry the source's current sections
    (``importplan.Carried``): only processed parts committed. A failed one (its job dead or
    paused) is retried by importing again, as ``cm retry`` would, in the admitting transaction
    (the same part, never a second copy); its tokens are in the estimate.
  - The rows are recorded in the transaction that admits the parts; a plan made before another
    import of the same source committed is refused with ``IMPORT_PLAN_STALE`` (plan again).
- Refusals before anything is written: ``IMPORT_DISABLED`` unless ``document_import`` is in
  ``disclosure.allowedProvenance``; a workspace that is not a registered, allowed project; an
  author or label outside its set; the sensitive scan of each part (``SENSITIVE_CONTENT_REJECTED
  part i/n: …``). ``plan`` stops there: the CLI shows the plan (parts, bytes, estimated tokens) and
  asks before queuing above ``importplan.CONFIRM_TOKENS``.
- Admission of every missing part and a flush request share one transaction. Then either the foreground Writer loop of
  ``cm flush`` runs, or (``--no-wait``) a detached drain is reserved in that same transaction.
  ``complete`` is true only when every part is ``processed``; re-importing the same bytes resumes
  pending or retrying parts (a part quarantined or cancelled stays so for this exact text; once
  the file changes, its sections are sent again with the changes: ``resent``).
- The Writer's import guard (enforced at commit) lets an import append attributed Sections but
  never forget, remove or replace Sections that user turns produced.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

from cmrunner.agentrt import budget
from cmrunner.core import config as config_mod, importkinds, projects, workspace
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.manage import importdelta, importplan, projectaccess
from cmrunner.secrets import safety

if TYPE_CHECKING:
    from cmrunner.writer_proc.writer import Outcome

AUTHORS = ("user", "agent", "third_party", "mixed", "unknown")
SUFFIXES = (".md", ".markdown")
LABEL_LIMIT = 64
# Said in the update parts themselves, not in the Memory Agent's instructions: only updates pay for it.
UPDATE_NOTE = ("a later version of a file imported before: only its edited or added sections, and any whose "
               "earlier import never reached memory, are here (their first block says change); correct what the earlier import wrote under the same heading path; "
               "sections not here are unchanged, or removed from the file and not to be forgotten")

_BLOCK_KINDS = {
    "heading_open": "heading", "paragraph_open": "paragraph", "bullet_list_open": "list",
    "ordered_list_open": "list", "blockquote_open": "quote", "table_open": "table", "fence": "code",
    "code_block": "code", "hr": "thematic_break", "html_block": "html",
}


def read_markdown(path: str, suffixes: tuple[str, ...] = SUFFIXES) -> tuple[str, str]:
    """The normalised text and the file name of an importable Markdown file (see contract);
    ``suffixes`` widens the names accepted (``cm import --from`` also reads Cursor's ``.mdc``)."""
    name = os.path.basename(path)
    if not name.lower().endswith(suffixes):
        raise CmError("UNSUPPORTED_FILE_TYPE", "only .md and .markdown files can be imported")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise CmError("FILE_NOT_FOUND", f"{path} does not exist; check the path") from None
    except OSError:
        if os.path.islink(path):
            raise CmError("UNSUPPORTED_FILE_TYPE", f"{path} is a symbolic link; import the file it points to") from None
        raise CmError("FILE_NOT_FOUND", f"{path} cannot be opened; check the path and its permissions") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CmError("UNSUPPORTED_FILE_TYPE", f"{path} is not a regular file")
        if info.st_size > importplan.MAX_IMPORT_BYTES:
            raise CmError("IMPORT_TOO_LARGE", f"{name} has {info.st_size:,} bytes, more than cm imports at once "
                                              f"({importplan.MAX_IMPORT_BYTES:,}); split it into several files")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if b"\x00" in raw:
        raise CmError("INVALID_ENCODING", f"{name} contains NUL bytes; it is not a text file")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise CmError("INVALID_ENCODING", f"{name} is not valid UTF-8; convert it to UTF-8 first") from None
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise CmError("EMPTY_DOCUMENT", f"{name} is empty; nothing to import")
    return text, name


def blocks_of(text: str) -> list[dict]:
    """The top-level structural blocks with 1-based inclusive line ranges and heading paths."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks: list[dict] = []
    headings: list[tuple[int, str]] = []
    for index, token in enumerate(tokens):
        kind = _BLOCK_KINDS.get(token.type)
        if kind is None or token.level != 0 or token.map is None:
            continue
        start, end = token.map
        block: dict = {"kind": kind, "lines": [start + 1, max(start + 1, end)]}
        if kind == "heading":
            level = int(token.tag[1:])
            title = tokens[index + 1].content if index + 1 < len(tokens) else ""
            headings = [h for h in headings if h[0] < level]
            block["level"] = level
            block["headingPath"] = [h[1] for h in headings]
            headings.append((level, title))
        else:
            block["headingPath"] = [h[1] for h in headings]
        blocks.append(block)
    return blocks


def check_label(label: str | None, file_name: str) -> str:
    """The display label: ``label`` if given (printable, at most 64 characters), else the file name."""
    if label is None:
        return "".join(c if c.isprintable() else "?" for c in file_name)[:LABEL_LIMIT]
    if not label.strip() or len(label) > LABEL_LIMIT or not label.isprintable():
        raise CmError("INVALID_IMPORT_LABEL", f"--label must be 1-{LABEL_LIMIT} printable characters")
    return label


def check_author(author: str) -> str:
    if author not in AUTHORS:
        raise CmError("INVALID_IMPORT_AUTHOR", "--author must be one of " + ", ".join(AUTHORS))
    return author


def resolve_workspace(paths: DataPaths, workspace_path: str) -> projects.Project:
    """The registered project ``--workspace`` names; outside any, ``UNREGISTERED_WORKSPACE`` with the
    one command that registers the folder and allows its memory."""
    try:
        return workspace.resolve(paths, workspace_path)
    except CmError as exc:
        if exc.code != "UNREGISTERED_WORKSPACE":
            raise
        real = os.path.realpath(workspace_path)
        raise CmError(exc.code, f"{real} is not inside a registered project; register it and allow its memory "
                                f"with `{projectaccess.remedy(real)}`, then import again") from None


def import_scope(cfg: config_mod.Config, paths: DataPaths, workspace_path: str | None) -> str:
    project = resolve_workspace(paths, workspace_path) if workspace_path is not None else None
    scope = project.scope if project is not None else "global"
    if scope not in cfg.allowed_scopes:
        raise CmError("UNAUTHORIZED_SCOPE", unauthorized(scope, project))
    return scope


def unauthorized(scope: str, project: projects.Project | None) -> str:
    """Why an import may not go to ``scope``, and the one command that allows it (for a project:
    ``cm project register … --allow``, which adds it to both scope lists)."""
    fix = projectaccess.remedy(project.path, project.name) if project is not None else \
        f"cm config set disclosure.allowedScopes +{scope}"
    return f"{scope} is not in disclosure.allowedScopes; to import into it, `{fix}`"


class Planned:
    """A validated import and its plan, bound to the configuration it was made under."""

    __slots__ = ("cfg", "paths", "plan")

    def __init__(self, cfg: config_mod.Config, paths: DataPaths, plan: importplan.Plan) -> None:
        self.cfg = cfg
        self.paths = paths
        self.plan = plan


def _envelope(import_id: str, label: str, author: str, file_name: str, digest: str, index: int, count: int,
              piece: importplan.Piece, kind: str | None = None, update: dict | None = None) -> str:
    body: dict = {"kind": "document_import", "importId": import_id, "sourceLabel": label, "declaredAuthor": author}
    if kind is not None:  # absent for `cm import FILE`: its envelopes stay byte for byte what they were
        body[importkinds.ENVELOPE_FIELD] = kind
    body.update({"fileName": file_name, "contentDigest": f"sha256:{digest}", "part": {"index": index, "count": count}})
    if update is not None:  # only a later import of a source: its changed sections
        body["update"] = update
    body.update({"headingPath": piece.heading_path, "blocks": piece.blocks, "text": piece.text})
    return json.dumps(body, ensure_ascii=False)


def _update(basis: int, delta: importdelta.Delta) -> dict:
    """What an update part says about itself: the file was imported before, and only these
    sections (marked ``change`` in ``blocks``) are sent; removed sections are not forgotten."""
    return {"note": UPDATE_NOTE, "previousImports": basis, "sectionsInFile": delta.total, "edited": delta.edited,
            "added": delta.added, "resent": delta.resent, "unchanged": delta.unchanged,
            "removedNotForgotten": len(delta.removed)}


def source_key(path: str, label: str | None) -> str:
    """The stable key of ``cm import FILE``'s source: its ``--label``, else the file's real path."""
    return label if label is not None else os.path.realpath(path)


def _known(paths: DataPaths | None, scope: str,
           source: str) -> tuple[int, list[tuple[str, str, bool]], frozenset[str], importplan.Carried, list[str]]:
    """The source's last import: its generation, its sections ((digest, place, current)), the
    digests of current sections whose carrying parts were cancelled or quarantined, what became of
    the parts that carried its current sections, and the texts of those that failed (to retry)."""
    if paths is None:
        return 0, [], frozenset(), importplan.Carried(), []
    from cmrunner.capture import importsections, observations
    from cmrunner.core import store

    conn = store.open_existing(paths)
    if conn is None:
        return 0, [], frozenset(), importplan.Carried(), []
    try:
        basis, rows = importsections.known(conn, scope, source)
        carriers = sorted({r[3] for r in rows if r[2] and r[3]})
        lost = observations.with_lost_parts(conn, carriers)
        parts = observations.parts_in(conn, carriers)
        failed = [p for p in parts if p[1] in importplan.FAILED_STATES]
        texts = observations.texts(conn, [p[0] for p in failed])
    finally:
        conn.close()
    jobs: dict[str, str | None] = {}
    for _id, _state, job, issue in failed:
        if job is not None:
            jobs.setdefault(job, issue)
    carried = importplan.Carried(
        processed=sum(1 for p in parts if p[1] == "processed"),
        waiting=sum(1 for p in parts if p[1] in importplan.WAITING_STATES),
        failed=tuple(jobs.items()), lost=sum(1 for p in parts if p[1] in importplan.LOST_STATES))
    retry = [t for t in (texts.get(p[0]) for p in failed) if t is not None]
    return basis, [r[:3] for r in rows], frozenset(r[0] for r in rows if r[2] and r[3] in lost), carried, retry


def prepare(cfg: config_mod.Config, paths: DataPaths, path: str, workspace_path: str | None, author: str,
            label: str | None) -> importplan.Plan:
    """Every check before queuing, in the order the user can fix them, and the plan of parts."""
    author = check_author(author)
    if "document_import" not in cfg.disclosure.allowed_provenance:
        raise CmError("IMPORT_DISABLED",
                      "imports are disabled; allow them with "
                      "`cm config set disclosure.allowedProvenance +document_import`")
    scope = import_scope(cfg, paths, workspace_path)
    text, file_name = read_markdown(path)
    return prepare_text(cfg, text, file_name, scope, author, check_label(label, file_name), paths=paths,
                        source=source_key(path, label))


def prepare_text(cfg: config_mod.Config, text: str, file_name: str, scope: str, author: str,
                 label: str, kind: str | None = None, paths: DataPaths | None = None,
                 source: str | None = None) -> importplan.Plan:
    """The plan of one normalised text already read and checked for scope and permission: parts,
    the sensitive scan of each, identity and estimate (``cm import --from`` plans each file here,
    with its ``importkinds`` kind). With ``paths``, the source (``source``, default ``label``) is
    compared section by section with its last import and only new or edited sections are planned
    (see module contract)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    import_id = f"md-{digest}"
    source = label if source is None else source
    blocks = blocks_of(text)
    current = importdelta.sections(text, blocks)
    basis, known, lost, carried, retry = _known(paths, scope, source)
    context: list = ["markdown", "v2", import_id, scope]
    delta, update, send, send_blocks = None, None, text, blocks
    if basis:
        delta = importdelta.classify(current, known, lost)
        update = _update(basis, delta)
        context.append(f"update-{basis + 1}")
        send, send_blocks = importdelta.changed_text(text, current, delta, blocks)
    # A part must fit one job's sources; an explicit disclosure cap (raw bytes plus the Writer's
    # framing of 32) is never larger than the same part as sent, so a smaller cap sizes the parts.
    limit, code = budget.job_limit(cfg.max_request_bytes, []), "SOURCE_TOO_LARGE"
    cap = cfg.disclosure.source_cap
    if cap is not None and cap - 32 < limit:
        limit, code = cap - 32, "IMPORT_CHUNK_TOO_LARGE"
    empty = importplan.Piece("", [], [])
    reserve = budget.wire_bytes(_envelope(import_id, label, author, file_name, digest, 1, 1, empty, kind, update))
    try:
        pieces = importplan.split(send, send_blocks, limit, reserve, code) if send else []
    except CmError as exc:
        if exc.code != "IMPORT_CHUNK_TOO_LARGE":
            raise
        raise CmError(exc.code, f"the import needs more than the explicit disclosure cap of {cap} bytes; raise "
                                "the cap in config.json or import a smaller file (nothing is truncated)") from None
    count = len(pieces)
    envelopes = []
    for index, piece in enumerate(pieces, start=1):
        violations = safety.scan_value({"sourceLabel": label, "fileName": file_name, "text": piece.text})
        if violations:
            rules = ", ".join(sorted({v.rule_id for v in violations}))
            raise CmError("SENSITIVE_CONTENT_REJECTED",
                          f"part {index}/{count}: {rules}; remove or redact it, then import again")
        envelopes.append(_envelope(import_id, label, author, file_name, digest, index, count, piece, kind, update))
    # importing again also retries the parts that failed (their own text, as queued): they cost again
    tokens, method = importplan.estimate_tokens(envelopes + retry)
    namespace = "import:" + json.dumps(context, separators=(",", ":"))
    return importplan.Plan(scope, import_id, namespace, envelopes, len(text.encode("utf-8")),
                           sum(budget.wire_bytes(e) for e in envelopes), tokens, method, source,
                           [(s.digest, s.place, delta is None or i in delta.changes) for i, s in enumerate(current)],
                           basis, delta, len(send.encode("utf-8")), carried,
                           sum(budget.wire_bytes(t) for t in retry), len(retry))


def plan(home: str, path: str, workspace_path: str | None, author: str, label: str | None) -> Planned:
    """Validate an import and plan its parts; nothing is queued (``--dry-run`` stops here)."""
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    return Planned(cfg, paths, prepare(cfg, paths, path, workspace_path, author, label))


def part_entry(index: int) -> str:
    return f"part-{index}"


def queue(home: str, paths: DataPaths, planned: importplan.Plan, spawn_drain: bool) -> bool:
    """Admit the missing parts and request a flush in one transaction; ``True`` if all were there."""
    from cmrunner.capture import importsections, observations
    from cmrunner.core import drainlease, jobstore, store
    from cmrunner.writer_proc import jobs
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            if importsections.generation(conn, planned.scope, planned.source) != planned.basis:
                raise CmError("IMPORT_PLAN_STALE", "this source was imported again while its plan was shown; "
                                                   "run the import again to plan what is left")
            now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            if planned.sections and (planned.basis == 0 or planned.count):
                importsections.record(conn, planned.scope, planned.source, planned.basis + 1, planned.sections,
                                      planned.namespace, int(datetime.datetime.now(datetime.UTC).timestamp() * 1000))
            duplicate = True
            for index, envelope in enumerate(planned.envelopes, start=1):
                if observations.exists(conn, planned.namespace, part_entry(index)):
                    continue
                duplicate = False
                observations.admit(conn, namespace=planned.namespace, entry_id=part_entry(index), text=envelope,
                                   scope=planned.scope, source="document_import", observed_at=now, agent="cm-import")
            for job in planned.retries:  # still failed: revive it as `cm retry` does (a job retried since is left)
                if jobstore.state_of(conn, job) in importplan.FAILED_STATES:
                    jobs.retry(conn, job, int(datetime.datetime.now(datetime.UTC).timestamp() * 1000))
                    duplicate = False
            jobstore.request_flush(conn)
            if spawn_drain:
                drainlease.ensure_drain(conn, home)
    finally:
        conn.close()
    return duplicate


def part_states(paths: DataPaths, planned: importplan.Plan) -> list[dict]:
    """Each part's outcome (``mcp_items.outcome`` shape) plus its index and count. A plan that sends
    nothing (no section changed) reports the parts that carried this exact text before, if any."""
    from cmrunner.capture import observations
    from cmrunner.core import store
    from cmrunner.mcpserver import items as mcp_items

    conn = store.open_store(paths)
    try:
        carried = [(planned.namespace, planned.count)] if planned.count else observations.namespaces_with_prefix(
            conn, "import:" + json.dumps(["markdown", "v2", planned.import_id, planned.scope],
                                         separators=(",", ":"))[:-1])
        found = [(mcp_items.outcome(conn, namespace, part_entry(i)), i, count)
                 for namespace, count in carried for i in range(1, count + 1)]
    finally:
        conn.close()
    if any(f is None for f, _i, _n in found):  # pragma: no cover - queued above in this process
        raise CmError("IMPORT_IDENTITY_CONFLICT", "a queued import part disappeared; run `cm status`")
    return [{"index": i, "count": count, **f[0]} for f, i, count in found if f is not None]


class ImportReport:
    __slots__ = ("import_id", "scope", "duplicate", "parts", "waited", "note")

    def __init__(self, import_id: str, scope: str, duplicate: bool, parts: list[dict], waited: bool,
                 note: str | None) -> None:
        self.import_id = import_id
        self.scope = scope
        self.duplicate = duplicate
        self.parts = parts
        self.waited = waited
        self.note = note

    @property
    def complete(self) -> bool:
        return all(p["state"] == "processed" for p in self.parts)


def run(home: str, planned: Planned, wait: bool, progress: Callable[[Outcome], None]) -> ImportReport:
    """Queue a planned import, optionally run the Writer loop, and report each part's state."""
    return run_many(home, planned.cfg, planned.paths, [planned.plan], wait, progress)[0]


def run_many(home: str, cfg: config_mod.Config, paths: DataPaths, plans: list[importplan.Plan], wait: bool,
             progress: Callable[[Outcome], None]) -> list[ImportReport]:
    """Queue several planned imports, then (``wait``) one Writer loop for all; a report per plan."""
    duplicates = [queue(home, paths, p, spawn_drain=not wait and i == len(plans) - 1) for i, p in enumerate(plans)]
    note = None
    if wait and plans:
        from cmrunner.writer_proc import flush as flush_mod

        try:
            if flush_mod.flush(paths, cfg, progress).followed:
                note = "a running drain held the queue; this import followed it to its end"
        except CmError as exc:
            if exc.code != "UNCONFIGURED":
                raise
            note = "no model is configured, so the import stays queued; configure one and run `cm flush`"
    return [ImportReport(p.import_id, p.scope, duplicate, part_states(paths, p), wait, note)
            for p, duplicate in zip(plans, duplicates, strict=True)]
