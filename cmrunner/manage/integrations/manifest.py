"""The ownership manifest ``<home>/integrations.json``: exactly what cm installed, and for whom.

Contract:
- ``hosts`` maps each installed host (``pi``, ``codex``, ``chatgpt``) to its configuration root and
  options; ``files`` maps every file cm wrote to its sha256 and owners; ``entries`` lists every
  entry cm added to a shared TOML file with its exact value and owners.
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
LIMIT = 1 << 20


def path_of(home: str) -> str:
    return os.path.join(home, FILE_NAME)


def empty() -> dict:
    return {"version": 1, "hosts": {}, "files": {}, "entries": []}


def load(home: str) -> dict:
    raw = fsutil.read_regular_file(path_of(home), LIMIT, "integrations manifest")
    if raw is None:
        return empty()
    try:
        data = json.loads(raw.decode("utf-8"))
        ok = (data.get("version") == 1 and isinstance(data["hosts"], dict) and isinstance(data["files"], dict)
              and isinstance(data["entries"], list))
    except (UnicodeDecodeError, ValueError, KeyError, AttributeError):
        ok = False
    if not ok:
        raise CmError("INTEGRATIONS_MANIFEST_INVALID",
                      f"{path_of(home)} is damaged; restore it, or remove cm's entries from your agents by hand and "
                      "delete it")
    return data


def render(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
