"""The findings cache: the deep scan's verdict on each memory document, for the read path.

Contract
- One file, ``<data root>/runtime/secret-findings.json`` (0600, ``fsutil.write_atomic``):
  ``{"version": 1, "detector": DETECTOR, "documents": {"<sha256 of the file>": [[unit, rule,
  fingerprint, title_shown], ...]}}``. It holds unit indexes, rule ids and fingerprints only:
  never a value, a heading or any other text of the document.
- ``lookup(paths, sha256)`` (light, the read path) returns the entry for exactly those bytes, or
  None when there is none, the file is missing or unreadable, or it was written by another
  detector version. A hit can never be stale: a changed document has another sha256.
- ``load``/``entry``/``save`` are the storage half of ``withhold.refresh`` (which runs the deep
  scan): this module only stores verdicts and never scans, so the scanner and its cache do not
  import each other.
- A document larger than the reader's 1 MiB limit, or not UTF-8, is left out (the reader refuses
  it anyway). Concurrent refreshes are harmless: entries are deterministic, last writer wins.
Stdlib only.
"""

from __future__ import annotations

import json
import os

from cmrunner.core import fsutil, scopes
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

# Bump when a rule changes what it finds: entries of another detector version are ignored.
DETECTOR = "cm-secrets-3"
FILE_NAME = "secret-findings.json"
_LIMIT = 4 << 20
_DOCUMENT_LIMIT = 1 << 20


def path(paths: DataPaths) -> str:
    return os.path.join(paths.runtime, FILE_NAME)


def _load(paths: DataPaths) -> dict[str, list]:
    try:
        raw = fsutil.read_regular_file(path(paths), _LIMIT, "the secret findings cache")
        if raw is None:
            return {}
        data = json.loads(raw.decode("utf-8"))
    except (CmError, ValueError, UnicodeDecodeError, OSError):
        return {}
    if not isinstance(data, dict) or data.get("version") != 1 or data.get("detector") != _detector():
        return {}
    documents = data.get("documents")
    return documents if isinstance(documents, dict) else {}


def _detector() -> str:
    return DETECTOR


def lookup(paths: DataPaths, digest: str) -> list[tuple[int, str, str, bool]] | None:
    return _entry(_load(paths), digest)


def _entry(documents: dict[str, list], digest: str) -> list[tuple[int, str, str, bool]] | None:
    entry = documents.get(digest)
    if not isinstance(entry, list):
        return None
    out = []
    for item in entry:
        if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], int) and isinstance(item[1], str)
                and isinstance(item[2], str) and isinstance(item[3], bool)):
            return None
        out.append((item[0], item[1], item[2], item[3]))
    return out


def current_documents(paths: DataPaths) -> list[tuple[str, str]]:
    """``(target, markdown)`` of every readable memory document, profile, preferences, projects."""
    targets = list(scopes.GLOBAL_TARGETS)
    try:
        names = sorted(os.listdir(paths.projects_dir))
    except OSError:
        names = []
    targets += [scopes.project_scope(name[:-3]) for name in names if name.endswith(".md")]
    out = []
    for target in targets:
        try:
            raw = fsutil.read_regular_file(paths.document(target), _DOCUMENT_LIMIT, f"memory document {target}")
            if raw is not None:
                out.append((target, raw.decode("utf-8")))
        except (CmError, UnicodeDecodeError):
            continue
    return out


def load(paths: DataPaths) -> dict[str, list]:
    """Every entry of the cache file (empty when missing, unreadable or of another detector)."""
    return _load(paths)


def entry(documents: dict[str, list], digest: str) -> list[tuple[int, str, str, bool]] | None:
    return _entry(documents, digest)


def save(paths: DataPaths, documents: dict[str, list]) -> None:
    """Rewrite the cache with exactly ``documents``; a failure is ignored (the cache only saves
    work: the read path scans by itself without it)."""
    if not os.path.isdir(paths.runtime):
        return
    body = {"version": 1, "detector": _detector(), "documents": documents}
    try:
        fsutil.write_atomic(path(paths), (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))
    except (CmError, OSError):
        pass
