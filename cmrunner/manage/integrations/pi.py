"""What Pi needs: cm's bridge extension in Pi's extensions folder, loaded exactly once.

Contract:
- Pi discovers ``<agent dir>/extensions/*/index.ts`` (hosts.md §2.1; the agent dir is
  ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``). cm installs ``extensions/common-memory/`` with two
  files it owns: ``bridge.ts``, a copy of the packaged bridge, and ``index.ts``, a generated
  wrapper that pins ``COMMON_MEMORY_CM`` (the interpreter argv that runs cm) and
  ``COMMON_MEMORY_HOME`` for the bridge and re-exports it. ``bridge.ts`` in a subfolder is not
  itself discovered, so Pi loads one copy.
- ``duplicates`` finds other copies Pi would also load: a top-level ``extensions/*.ts`` or another
  ``extensions/*/index.ts`` carrying the bridge's markers, or a ``settings.json`` extension or
  package entry naming common-memory. Installing next to one fails closed (``PI_BRIDGE_DUPLICATE``):
  the bridge must never be loaded twice, and cm never takes over a copy it did not install.
"""

from __future__ import annotations

import json
import os

from cmrunner.core.errors import CmError
from cmrunner.manage import hostconfig

FOLDER = os.path.join("extensions", "common-memory")
MARKERS = (b"__commonMemoryBridge", b"COMMON_MEMORY_CM")


def bridge_source() -> bytes:
    import cmrunner.bridge

    path = os.path.join(os.path.dirname(os.path.abspath(cmrunner.bridge.__file__)), "pi-extension", "index.ts")
    with open(path, "rb") as handle:
        return handle.read()


def wrapper(pins: hostconfig.Pins) -> bytes:
    header = pins.header(f"Common Memory (cm) for Pi, installed by cm {pins.version}. cm owns this folder: change "
                         "it from `cm` (Agent Integration), not by hand.")
    lines = [f"// {line}".rstrip() for line in header]
    lines += [
        "// The bridge reads these two values each time it runs cm.",
        f"process.env.COMMON_MEMORY_CM = {json.dumps(json.dumps(pins.hook_argv()))};",
        f"process.env.COMMON_MEMORY_HOME = {json.dumps(pins.home)};",
        'export { default } from "./bridge.ts";',
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def desired(root: str, pins: hostconfig.Pins) -> dict[str, bytes]:
    folder = os.path.join(root, FOLDER)
    return {os.path.join(folder, "bridge.ts"): bridge_source(), os.path.join(folder, "index.ts"): wrapper(pins)}


def prune_dirs(root: str) -> list[str]:
    return [os.path.join(root, FOLDER)]


def _carries_bridge(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return False
    return any(marker in data for marker in MARKERS)


def duplicates(root: str) -> list[str]:
    """Other places Pi would load a Common Memory bridge from (see module contract)."""
    found = []
    extensions = os.path.join(root, "extensions")
    ours = os.path.join(root, FOLDER)
    if os.path.isdir(extensions):
        for name in sorted(os.listdir(extensions)):
            path = os.path.join(extensions, name)
            if path == ours:
                continue
            candidate = os.path.join(path, "index.ts") if os.path.isdir(path) else path
            if candidate.endswith(".ts") and os.path.isfile(candidate) and _carries_bridge(candidate):
                found.append(candidate)
    settings = os.path.join(root, "settings.json")
    try:
        with open(settings, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        data = {}
    if isinstance(data, dict):
        for key in ("extensions", "packages"):
            for entry in data.get(key) or []:
                if isinstance(entry, str) and ("common-memory" in entry or "pi-extension" in entry):
                    found.append(f"{settings} ({key}: {entry})")
    return found


def check_no_duplicates(root: str) -> None:
    found = duplicates(root)
    if found:
        raise CmError("PI_BRIDGE_DUPLICATE", "Pi already loads another Common Memory bridge (" + "; ".join(found)
                      + "); remove it first, the bridge must never be loaded twice")
