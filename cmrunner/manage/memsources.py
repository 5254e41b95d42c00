"""Where the agents keep the memory a new user already has, and which of those files cm may import.

Contract (``../shared/hosts-more.md`` §4; ``cm import --from``):
- ``discover(source, user_home, project, registered)`` lists the files of one source on this
  machine as ``Found`` (path, source label, kind, target scope, declared author) and the files it
  will not read as ``Skipped`` (path, stable code, reason). It reads nothing but names, links,
  Gemini's project registry and markers, the project folders Claude Code recorded in
  ``~/.claude.json`` and, for the files it returns, their text (through
  ``importer.read_markdown``: regular UTF-8 Markdown, no NUL, not empty, at most
  ``MAX_FILE_BYTES``). Nothing here is sent anywhere.
- Sources: ``claude`` (``~/.claude``, or ``$CLAUDE_CONFIG_DIR`` as Claude Code reads it, below:
  ``~/.claude/CLAUDE.md``; auto memory ``~/.claude/projects/<dir>/memory/``
  topic files with ``name``/``description``/``type`` front matter, whose index ``MEMORY.md`` is
  skipped when topic files carry its entries; the project's ``CLAUDE.local.md``), ``codex``
  (``$CODEX_HOME`` or ``~/.codex``: ``memories/memory_summary.md`` and ``memories/MEMORY.md``, never
  ``raw_memories.md`` or ``rollout_summaries/``), ``gemini`` (``~/.gemini``, ``~`` being
  ``$GEMINI_CLI_HOME`` when set: ``~/.gemini/GEMINI.md``, and each
  project's private notes ``~/.gemini/tmp/<project-id>/memory/*.md``, index ``MEMORY.md`` included,
  in the scope of the registered project that holds the root Gemini recorded for that id
  (``gemini_project_roots``; a registry giving one id to roots of different projects, or of a
  project and no project, without a marker: ``PROJECT_AMBIGUOUS``); never ``memory/.inbox/`` or
  ``memory/skills/``, auto-memory drafts the user has not approved) and ``project`` (a registered
  project's ``AGENTS.md``, ``CLAUDE.md``, ``GEMINI.md``, ``.cursor/rules/**/*.mdc`` that always
  apply or have globs, ``.github/copilot-instructions.md``).
- Scope: a per-project memory folder (Claude's ``projects/<dir>/memory/``, Gemini's
  ``tmp/<id>/memory/``) is its project's, whatever its files say: every file in it targets that
  project's scope, never ``global``, or the folder is skipped. Claude's folder belongs to the
  registered project whose root it names exactly (``claude_project_dir``; a prefix never matches);
  the name folds every character but letters and digits alike, so when it spells several roots
  (``/src/my_app``, ``/src/my-app``), registered or among the folders Claude Code recorded in
  ``~/.claude.json`` (``claude_known_roots``), the folder is ``PROJECT_AMBIGUOUS``, naming them,
  unless ``--workspace`` picks one. With ``project`` (``--workspace``) given, auto memory and Gemini's
  project notes are that project's only.
- Kinds are the ids of ``cmrunner.core.importkinds`` (which also says what each may become):
  ``personal`` (the user's ``CLAUDE.md``, Codex memories, ``~/.gemini/GEMINI.md``; global scope),
  auto memory topic files by their front matter ``type`` (``user_fact``, ``user_feedback``,
  ``project_fact``, ``reference``; no ``type``: ``project_fact``; any other value is not guessed:
  ``UNKNOWN_KIND``), the auto memory index alone, ``CLAUDE.local.md`` and Gemini's project notes
  (``project_fact``), checked-in ``AGENTS.md``/``CLAUDE.md``/``GEMINI.md`` (``team_convention``)
  and Cursor rules and Copilot instructions (``instructions``).
- A file is skipped with a code, never half-read: ``UNREADABLE``, ``SYMLINK_LEAVES_ROOT`` (its real
  path, through a link to it or to a folder above it, is outside its root: the agent's own
  directory such as ``~/.claude``, or the project), ``BINARY``, ``OVERSIZED``, ``EMPTY``,
  ``NO_PROJECT`` (a project memory folder with no registered project for it),
  ``PROJECT_AMBIGUOUS`` (see Scope), ``UNKNOWN_KIND`` (see Kinds), ``NOT_APPROVED`` (Gemini's
  drafts, named but not read), ``RULE_NOT_ALWAYS_APPLIED``, ``INDEX_ONLY``. An ``@path`` import in
  an instructions file (outside code fences, at most ``MAX_IMPORT_DEPTH`` hops) that stays inside
  the root is imported as its own file; one that leaves it is ``IMPORT_LEAVES_ROOT`` and one already
  visited ``IMPORT_CYCLE`` (its text is not read).
  Files holding a secret are skipped later, by the plan's sensitive scan (``memimport``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cmrunner.core import fsutil, importkinds, projects
from cmrunner.core.errors import CmError
from cmrunner.manage import importer, projectaccess

SOURCES = ("claude", "codex", "gemini", "project")
MAX_FILE_BYTES = 1 << 20   # memory files are kilobytes; a larger one is not what these agents write
MAX_IMPORT_DEPTH = 5       # Claude Code's own limit for @imports
CLAUDE_STATE_BYTES = 256 << 20  # ~/.claude.json keeps every project's history: megabytes after months
MDC = (".md", ".markdown", ".mdc")
_IMPORT = re.compile(r"(?:^|\s)@((?:~/|\.{1,2}/|/)?[\w.-][\w./-]*\.(?:md|markdown))\b")


@dataclass(frozen=True, slots=True)
class Found:
    path: str
    text: str
    label: str
    kind: str       # an id of ``importkinds.KINDS``
    scope: str      # 'global' or 'project:<id>'
    author: str


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    code: str
    reason: str


class _Walk:
    def __init__(self) -> None:
        self.found: list[Found] = []
        self.skipped: list[Skipped] = []
        self.seen: set[str] = set()

    def skip(self, path: str, code: str, reason: str) -> None:
        self.skipped.append(Skipped(path, code, reason))

    def read(self, path: str, root: str) -> str | None:
        """The file's text, or ``None`` after recording why it is skipped (absent files: nothing)."""
        if not os.path.lexists(path):
            return None
        real = os.path.realpath(path)
        if not _inside(real, root):
            self.skip(path, "SYMLINK_LEAVES_ROOT", f"leads through a link to {real}, outside {root}")
            return None
        try:
            if os.path.getsize(real) > MAX_FILE_BYTES:
                self.skip(path, "OVERSIZED", f"larger than {MAX_FILE_BYTES:,} bytes; import it with `cm import FILE`")
                return None
            text, _name = importer.read_markdown(real, MDC)
        except OSError:
            self.skip(path, "UNREADABLE", "cannot be read; check its permissions")
            return None
        except CmError as exc:
            code = {"INVALID_ENCODING": "BINARY", "EMPTY_DOCUMENT": "EMPTY", "IMPORT_TOO_LARGE": "OVERSIZED"}.get(
                exc.code, "UNREADABLE")
            self.skip(path, code, exc.message)
            return None
        return text

    def add(self, path: str, root: str, label: str, kind: str, scope: str, author: str, depth: int = 0) -> None:
        real = os.path.realpath(path)
        if real in self.seen:
            return
        text = self.read(path, root)
        if text is None:
            return
        self.seen.add(real)
        self.found.append(Found(path, text, label[:importer.LABEL_LIMIT], kind, scope, author))
        for target in imports_of(text):
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), os.path.expanduser(target)))
            if not _inside(os.path.realpath(resolved), root):
                self.skip(resolved, "IMPORT_LEAVES_ROOT", f"@{target} in {path} leaves {root}; not read")
            elif os.path.realpath(resolved) in self.seen or depth + 1 > MAX_IMPORT_DEPTH:
                self.skip(resolved, "IMPORT_CYCLE", f"@{target} in {path} was already read or is too deep; not read again")
            else:
                prefix = label.split(":", 1)[0]
                self.add(resolved, root, f"{prefix}:import/{os.path.basename(resolved)}", kind, scope, author, depth + 1)


def _inside(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def imports_of(text: str) -> list[str]:
    """The ``@path`` imports of a Markdown text outside fenced code and inline code spans."""
    found: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            found += _IMPORT.findall(re.sub(r"`[^`]*`", "", line))
    return found


def front_matter(text: str) -> dict[str, str]:
    """The flat ``key: value`` pairs of a leading ``---`` block (what auto memory and Cursor rules
    write); stdlib instead of a YAML parser: these blocks are flat and yaml stays off cm's import set."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip().strip("'\"")
    return {}


def claude_project_dir(path: str) -> str:
    """Claude Code's directory name for a project path: every character but letters and digits is '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def discover(source: str, user_home: str, project: tuple[str, str] | None,
             registered: Sequence[projects.Project] = (), cwd: str | None = None) -> tuple[list[Found], list[Skipped]]:
    """The importable files of ``source`` and the skipped ones; ``project`` is (root, scope) of the
    registered project ``--workspace`` named, if any; ``registered`` the projects cm knows, to
    which Gemini's per-project memory is matched; ``cwd`` the folder cm runs in, a folder Claude
    Code's memory may belong to (see module contract)."""
    walk = _Walk()
    if source == "claude":
        _claude(walk, user_home, project, registered, cwd)
    elif source == "codex":
        codex_home = os.environ.get("CODEX_HOME") or os.path.join(user_home, ".codex")
        for name, label in (("memory_summary.md", "codex:memory_summary"), ("MEMORY.md", "codex:MEMORY")):
            walk.add(os.path.join(codex_home, "memories", name), codex_home, label, "personal", "global", "agent")
    elif source == "gemini":
        _gemini(walk, user_home, project, registered)
    elif source == "project":
        if project is None:
            raise CmError("WORKSPACE_REQUIRED", "--from project needs --workspace <path of a registered project>")
        _project(walk, *project)
    else:
        raise CmError("INVALID_ARGUMENTS", "--from must be one of " + ", ".join(SOURCES))
    return walk.found, walk.skipped


def _claude(walk: _Walk, user_home: str, project: tuple[str, str] | None,
            registered: Sequence[projects.Project], cwd: str | None = None) -> None:
    moved = os.environ.get("CLAUDE_CONFIG_DIR")  # Claude Code then keeps everything, .claude.json too, there
    claude = moved or os.path.join(user_home, ".claude")
    walk.add(os.path.join(claude, "CLAUDE.md"), claude, "claude:CLAUDE.md", "personal", "global", "user")
    if project is not None:
        root, scope = project
        walk.add(os.path.join(root, "CLAUDE.local.md"), root, "claude:CLAUDE.local.md", "project_fact", scope, "user")
    base = os.path.join(claude, "projects")
    try:
        dirs = sorted(os.listdir(base))
    except OSError:
        return
    # the folder cm runs in is one Claude Code may have run in too: its memory's remedy can name it
    known = claude_known_roots(os.path.join(moved or user_home, ".claude.json")) + ([cwd] if cwd else [])
    # --workspace: the folder its root spells, and those of the paths Claude Code ran it under (a link to it)
    wanted = None if project is None else {claude_project_dir(project[0])} | {
        claude_project_dir(path) for path in known if os.path.realpath(path) == project[0]}
    for name in dirs:
        if wanted is not None and name not in wanted:
            continue
        memory = os.path.join(base, name, "memory")
        try:
            files = sorted(f for f in os.listdir(memory) if f.endswith(".md"))
        except OSError:
            continue
        if not files:
            continue
        owner = project[1] if project is not None else _claude_owner(walk, memory, name, len(files), registered,
                                                                     known)
        if owner is not None:
            _claude_memory(walk, claude, memory, files, owner)


def claude_known_roots(state: str) -> list[str]:
    """The project folders Claude Code has run in: the keys of ``projects`` in ``~/.claude.json``
    (several MB on a machine used for months, hence the generous limit). Unreadable or damaged:
    none, and only registered projects are candidates."""
    try:
        raw = fsutil.read_regular_file(state, CLAUDE_STATE_BYTES, "Claude Code state")
        found = json.loads(raw.decode("utf-8"))["projects"] if raw is not None else {}
    except (CmError, ValueError, KeyError, TypeError):
        return []
    return [p for p in found if isinstance(p, str) and os.path.isabs(p)] if isinstance(found, dict) else []


def _claude_owner(walk: _Walk, memory: str, name: str, count: int, registered: Sequence[projects.Project],
                  known: Sequence[str]) -> str | None:
    """The scope of the one project whose root Claude Code's folder ``name`` spells, or ``None``
    after skipping the folder: that root is not registered (``NO_PROJECT``), or several roots spell
    it, registered or among the folders Claude Code recorded in ``known`` (``PROJECT_AMBIGUOUS``:
    the name folds ``/src/my_app`` and ``/src/my-app`` alike, and neither which was registered last
    nor which one cm knows says whose notes these are)."""
    candidates = sorted({p.path for p in registered if claude_project_dir(p.path) == name}
                        | {os.path.realpath(path) for path in known if claude_project_dir(path) == name})
    files = f"{count} file{'s' if count != 1 else ''}"
    owners = {p.path: p.scope for p in registered}
    if len(candidates) > 1:
        walk.skip(memory, "PROJECT_AMBIGUOUS",
                  f"Claude Code keeps one memory folder ({files}) for {' and '.join(candidates)}; "
                  f"`cm import --from claude --workspace <the registered one it belongs to>` imports it there")
        return None
    if not candidates or candidates[0] not in owners:
        whose = candidates[0] if candidates else "<its path>"
        walk.skip(memory, "NO_PROJECT",
                  f"Claude Code's memory ({files}) of {whose}, a project cm has not registered (the folder name is "
                  f"its path with every character but letters and digits as '-'); "
                  f"`{projectaccess.remedy(candidates[0] if candidates else None)}`, then import again")
        return None
    return owners[candidates[0]]


def _claude_memory(walk: _Walk, claude: str, memory: str, files: list[str], scope: str) -> None:
    """One project's auto memory, all of it in that project's ``scope``: a topic file by its front
    matter ``type`` (none or empty: a project fact; a value Claude Code does not write: ``UNKNOWN_KIND``), the
    index only when no topic file carries its entries."""
    topics = [f for f in files if f != "MEMORY.md"]
    if "MEMORY.md" in files:
        if topics:
            walk.skip(os.path.join(memory, "MEMORY.md"), "INDEX_ONLY",
                      "the index of the topic files, which are imported themselves")
        else:
            walk.add(os.path.join(memory, "MEMORY.md"), claude, "claude:auto-memory/MEMORY", "project_fact",
                     scope, "agent")
    for topic in topics:
        path = os.path.join(memory, topic)
        text = walk.read(path, claude)
        if text is None:
            continue
        meta = front_matter(text)
        kind = importkinds.AUTO_MEMORY_TYPES.get(meta["type"]) if meta.get("type") else "project_fact"
        if kind is None:  # the value is the file's text: never echoed
            walk.skip(path, "UNKNOWN_KIND", "its front matter `type:` is none of "
                                            f"{', '.join(importkinds.AUTO_MEMORY_TYPES)}; set one, then import again")
            continue
        label = f"claude:auto-memory/{meta.get('name') or topic[:-3]}"
        walk.found.append(Found(path, text, label[:importer.LABEL_LIMIT], kind, scope, "agent"))


def gemini_registry(gemini: str) -> dict[str, list[str]]:
    """Gemini CLI's ``<gemini>/projects.json`` turned around: project id → its project roots (one,
    unless the file was edited or merged by hand). A damaged registry counts as empty, as it does
    in Gemini."""
    try:
        raw = fsutil.read_regular_file(os.path.join(gemini, "projects.json"), MAX_FILE_BYTES, "Gemini project registry")
        mapping = json.loads(raw.decode("utf-8"))["projects"] if raw is not None else {}
    except (CmError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(mapping, dict):
        return {}
    roots: dict[str, list[str]] = {}
    for root, pid in sorted(mapping.items()):
        if isinstance(pid, str):
            roots.setdefault(pid, []).append(root)
    return roots


def gemini_project_roots(gemini: str, project_id: str, registry: dict[str, list[str]]) -> list[str]:
    """The project root whose memory Gemini CLI keeps in ``<gemini>/tmp/<project_id>/``, if known
    (a registry that gives one id to several roots without a marker: all of them).

    Gemini 0.61 (``ProjectRegistry.getShortId``) names a project by a slug of its root's base name
    (lower case, each run of characters outside ``a-z0-9`` one ``-``; ``-1``, ``-2`` … on a
    collision), records it in ``projects.json`` (``{"projects": {root: id}}``) and writes the root
    into ``tmp/<id>/.project_root``. The id cannot be recomputed from the root (a collision depends
    on which project came first), so it is read back: the marker first, as Gemini trusts it over
    the registry, then ``registry`` (``gemini_registry``).
    """
    try:
        marker = fsutil.read_regular_file(os.path.join(gemini, "tmp", project_id, ".project_root"), 4096,
                                          "Gemini project marker")
    except CmError:
        return []
    root = marker.decode("utf-8", "replace").strip() if marker is not None else ""
    return [r for r in ([root] if root else registry.get(project_id, [])) if os.path.isabs(r)]


def _gemini(walk: _Walk, user_home: str, project: tuple[str, str] | None,
            registered: Sequence[projects.Project]) -> None:
    gemini = os.path.join(os.environ.get("GEMINI_CLI_HOME") or user_home, ".gemini")  # as Gemini CLI reads it
    walk.add(os.path.join(gemini, "GEMINI.md"), gemini, "gemini:GEMINI.md", "personal", "global", "mixed")
    base = os.path.join(gemini, "tmp")
    try:
        ids = sorted(os.listdir(base))
    except OSError:
        return
    registry = gemini_registry(gemini)
    for pid in ids:
        memory = os.path.join(base, pid, "memory")
        try:
            names = sorted(os.listdir(memory))
        except OSError:
            continue
        roots = gemini_project_roots(gemini, pid, registry)
        owners = {projects.match(list(registered), r) for r in roots}
        if project is not None:
            if project[1] not in {o.scope for o in owners if o is not None}:
                continue   # --workspace: that project's notes only (it picks one of several roots)
            owners = {o for o in owners if o is not None and o.scope == project[1]}
        if len(owners) > 1:  # one folder, several projects' notes: neither is guessed
            walk.skip(memory, "PROJECT_AMBIGUOUS",
                      f"Gemini's projects.json gives {pid} to {' and '.join(roots)} and no tmp/{pid}/.project_root "
                      "says which; `cm import --from gemini --workspace <the registered one it belongs to>` imports "
                      "it there")
            continue
        owner = next(iter(owners), None)
        root = roots[0] if roots else None
        if owner is None:
            why = (f"Gemini's private notes for {root}, which is not a registered project; "
                   f"`{projectaccess.remedy(root)}`, then import again") if root is not None else \
                f"Gemini names no project root for {pid} (no tmp/{pid}/.project_root, not in projects.json)"
            walk.skip(memory, "NO_PROJECT", why)
            continue
        for name in names:
            path = os.path.join(memory, name)
            if name in (".inbox", "skills"):
                walk.skip(path, "NOT_APPROVED", "Gemini's auto-memory drafts, not yet approved in `/memory inbox`; "
                                                "not read")
            elif name.endswith(".md"):
                walk.add(path, gemini, f"gemini:project-memory/{name[:-3]}", "project_fact", owner.scope, "agent")


def _project(walk: _Walk, root: str, scope: str) -> None:
    for rel, kind in (("AGENTS.md", "team_convention"), ("CLAUDE.md", "team_convention"),
                      (".claude/CLAUDE.md", "team_convention"), ("GEMINI.md", "team_convention"),
                      (".github/copilot-instructions.md", "instructions")):
        walk.add(os.path.join(root, rel), root, f"project:{rel}", kind, scope, "mixed")
    rules = os.path.join(root, ".cursor", "rules")
    for folder, _dirs, files in sorted(os.walk(rules)):
        for name in sorted(files):
            if not name.endswith(".mdc"):
                continue
            path = os.path.join(folder, name)
            text = walk.read(path, root)
            if text is None:
                continue
            meta = front_matter(text)
            if meta.get("alwaysApply", "").lower() != "true" and not meta.get("globs"):
                walk.skip(path, "RULE_NOT_ALWAYS_APPLIED", "a manual or agent-requested Cursor rule; not imported")
                continue
            rel = os.path.relpath(path, root)
            walk.found.append(Found(path, text, f"project:{rel}"[:importer.LABEL_LIMIT], "instructions", scope, "mixed"))
