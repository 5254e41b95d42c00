"""Where first-run setup stands, so an interrupted setup resumes its pending integration step.

Contract:
- ``stage(home)`` is ``"model"`` while no model is configured (no ``config.json`` or no
  ``remote``), ``"integrations"`` while ``<home>/setup.json`` records a pending integration step,
  and ``None`` once setup is complete (the management home opens).
- The model step writes ``setup.json`` (step ``integrations``) right after the model is committed;
  choosing agents records the selection there before anything is installed; a successful install
  removes the file. A crash at any point therefore reopens the integration step with the last
  recorded selection, and never repeats the model form.
- ``remember_action``/``last_action`` keep the home menu's last action in ``<home>/tui.json``.
"""

from __future__ import annotations

import json
import os

from cmrunner.core import config as config_mod, fsutil
from cmrunner.core.errors import CmError

FILE_NAME = "setup.json"
UI_FILE = "tui.json"
LIMIT = 64 * 1024


def _path(home: str, name: str = FILE_NAME) -> str:
    return os.path.join(home, name)


def _read(path: str) -> dict | None:
    try:
        raw = fsutil.read_regular_file(path, LIMIT, "setup state")
    except CmError:
        return None
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stage(home: str) -> str | None:
    cfg = config_mod.load(home)
    if not cfg.exists or cfg.remote is None:
        return "model"
    return "integrations" if pending(home) is not None else None


def pending(home: str) -> dict | None:
    """``{"selected": [...] | None, "init": bool}`` of a pending integration step, or ``None``."""
    data = _read(_path(home))
    if data is None or data.get("step") != "integrations":
        return None
    selected = data.get("selected")
    if selected is not None and not (isinstance(selected, list) and all(isinstance(s, str) for s in selected)):
        selected = None
    return {"selected": selected, "init": bool(data.get("init"))}


def _write(home: str, body: dict, name: str = FILE_NAME) -> None:
    fsutil.ensure_private_dir(home, "configuration home")
    fsutil.write_atomic(_path(home, name), (json.dumps(body) + "\n").encode("utf-8"))


def begin_integrations(home: str) -> None:
    _write(home, {"version": 1, "step": "integrations", "selected": None, "init": False})


def record_selection(home: str, selected: list[str], init: bool) -> None:
    _write(home, {"version": 1, "step": "integrations", "selected": list(selected), "init": init})


def finish(home: str) -> None:
    try:
        os.unlink(_path(home))
    except FileNotFoundError:
        pass


def last_action(home: str) -> str | None:
    data = _read(_path(home, UI_FILE))
    value = data.get("lastAction") if data else None
    return value if isinstance(value, str) else None


def remember_action(home: str, action: str) -> None:
    if os.path.isdir(home):
        try:
            _write(home, {"lastAction": action}, UI_FILE)
        except (CmError, OSError):
            pass  # remembering the cursor is a convenience, never a reason to fail
