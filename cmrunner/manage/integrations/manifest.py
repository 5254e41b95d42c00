"""The ownership manifest ``<home>/integrations.json``: exactly what cm installed, and for whom.

Contract:
- ``hosts`` maps each installed host (``pi``, ``codex``, ``chatgpt``, ``claude-code``, ``gemini``)
  to its configuration root and options; ``files`` maps every file cm wrote to its sha256 and
  owners; ``entries`` lists every entry cm added to a shared TOML or JSON file with its exact value,
  owners and (JSON) its exact text as written. An entry the user already had, even identical to
  cm's, is never listed: it is not cm's to remove.
- ``created`` maps a JSON settings file to the containers cm created in it; ``[]`` in it means cm
  created the file itself (it did not exist), the only case in which cm deletes it. ``blank``
  maps a file that existed but held nothing (``""``, blanks, a byte order mark) to that text, given
  back when cm's removal leaves only ``{}``.
- Version 1 (before ``blank`` and entry texts) is read and upgraded: its ``[]`` marks are dropped,
  since version 1 also wrote one for a user's existing empty file. A file cm did create under
  version 1 is therefore left holding ``{}`` on removal instead of deleted: a leftover, never a
  loss. Its entries stay cm's (it recorded only entries equal to cm's own value).
- The manifest is written only inside the same transaction as the files it describes (``txn``),
  so it never claims a file cm did not write, and a removal never touches anything else.
- A damaged manifest is ``INTEGRATIONS_MANIFEST_INVALID``: cm then changes no host file.
"""

from __future__ import annotations

import json
import os

from cmrunner.core import fsutil
from cmrunner.core.errors import CmError

FILE_NAME = "integrations.json"
VERSION = 2
LIMIT = 1 << 20


def path_of(home: str) -> str:
    return os.path.join(home, FILE_NAME)


def empty() -> dict:
    return {"version": VERSION, "hosts": {}, "files": {}, "entries": []}


def load(home: str) -> dict:
    raw = fsutil.read_regular_file(path_of(home), LIMIT, "integrations manifest")
    if raw is None:
        return empty()
    try:
        data = json.loads(raw.decode("utf-8"))
        ok = (data.get("version") in (1, VERSION) and isinstance(data["hosts"], dict) and isinstance(data["files"], dict)
              and isinstance(data["entries"], list))
    except (UnicodeDecodeError, ValueError, KeyError, AttributeError):
        ok = False
    if not ok:
        raise CmError("INTEGRATIONS_MANIFEST_INVALID",
                      f"{path_of(home)} is damaged; restore it, or remove cm's entries from your agents by hand and "
                      "delete it")
    if data["version"] == 1:
        data = _upgrade(data)
    return data


def _upgrade(data: dict) -> dict:
    """A version 1 manifest as version 2 (see module contract for the rule)."""
    created = {path: [k for k in keys if k] for path, keys in data.get("created", {}).items()}
    data = {**data, "version": VERSION, "created": {p: k for p, k in created.items() if k}}
    if not data["created"]:
        del data["created"]
    return data


def render(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
