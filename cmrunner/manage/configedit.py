"""``cm config get KEY`` / ``cm config set KEY VALUE``: one setting of ``config.json`` at a time.

Contract:
- KEY is the dotted camelCase path of a field as the file spells it (``disclosure.allowedProvenance``,
  ``remote.model``, ``spend.tokensPerDay``); the typed model decides whether it exists
  (``configmodel.field_kind``), else ``CONFIG_KEY_UNKNOWN`` with the fields accepted there.
- VALUE is JSON when it parses as JSON (``5``, ``true``, ``["global"]``, ``{"mode": "env"}``) and
  text otherwise. Candidates are tried in order and the first that validates is saved: the JSON
  value; for ``null``, removing the key (an optional field that refuses null); the text itself (a
  model called ``5``). For a list, ``+ITEM`` appends ITEM and ``-ITEM`` removes it.
- The whole changed file is validated with the one validator before anything is written, and an
  invalid result is the first candidate's ``CONFIG_INVALID`` naming the field, exactly as a hand
  edit would get; a valid one is saved by ``config.save`` (atomic, durable, cache refreshed). A
  home without ``config.json`` starts from the defaults (and gets the file).
- ``remote.*`` needs a configured model first (``MODEL_NOT_CONFIGURED``: the wizard or ``config init``
  chooses one). A changed spend cap lets waiting work go at once (``spendcaps.release_waiting``).
"""

from __future__ import annotations

import copy
import json

from cmrunner.core import config as config_mod, configmodel
from cmrunner.core.errors import CmError

ABSENT = object()


class Change:
    """What ``set_value`` did: the value before and after (``ABSENT`` when the key is not in the file)."""

    __slots__ = ("key", "before", "after")

    def __init__(self, key: str, before: object, after: object) -> None:
        self.key = key
        self.before = before
        self.after = after

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _lookup(data: dict, parts: list[str]) -> object:
    node: object = data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def get_value(home: str, key: str) -> object:
    """The value of ``key`` in the configuration in use (``ABSENT`` when the file does not set it)."""
    configmodel.field_kind(key)
    return _lookup(config_mod.load(home).data, key.split("."))


def _with(data: dict, parts: list[str], value: object) -> dict:
    changed = copy.deepcopy(data)
    node = changed
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise CmError("CONFIG_INVALID", f"config.json field '{part}' is not an object; edit the file")
    if value is ABSENT:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return changed


def _candidates(kind: str, current: object, text: str) -> list[object]:
    if kind == "list" and text[:1] in "+-" and len(text) > 1:
        items = list(current) if isinstance(current, list) else []
        item = text[1:]
        if text[0] == "+":
            return [items if item in items else [*items, item]]
        return [[i for i in items if i != item]]
    found: list[object] = []
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = ABSENT
    if parsed is not ABSENT:
        found.append(parsed)
        if parsed is None:
            found.append(ABSENT)
    if not isinstance(parsed, str):
        found.append(text)
    return found


def set_value(home: str, key: str, text: str) -> Change:
    """Set ``key`` to ``text`` read as described in the module contract; validated, then saved."""
    return set_values(home, [(key, text)])[0]


def set_values(home: str, changes: list[tuple[str, str]]) -> list[Change]:
    """Several settings, each read and validated as ``set_value`` reads one, applied in order and
    saved once: all of them or none (``cm project register``'s scopes, one confirmation)."""
    cfg = config_mod.load(home)
    data = cfg.data
    done: list[Change] = []
    for key, text in changes:
        change, data = _apply(cfg, data, key, text)
        done.append(change)
    if any(c.changed for c in done) or not cfg.exists:
        config_mod.save(home, data)
        if any(c.key.split(".")[0] == "spend" for c in done):
            from cmrunner.manage import spendcaps

            spendcaps.release_waiting(home)
    return done


def _apply(cfg: config_mod.Config, data: dict, key: str, text: str) -> tuple[Change, dict]:
    """``data`` with ``key`` set to the first candidate of ``text`` that validates (see contract)."""
    kind = configmodel.field_kind(key)
    parts = key.split(".")
    if parts[0] == "remote" and len(parts) > 1 and cfg.remote is None:
        raise CmError("MODEL_NOT_CONFIGURED", "no model is configured yet; set one up with `cm config` or "
                                              "`cm config init --base-url URL --model NAME --api-key-stdin`, then "
                                              "change its settings here")
    before = _lookup(data, parts)
    first: CmError | None = None
    for candidate in _candidates(kind, before, text):
        changed = _with(data, parts, candidate)
        try:
            config_mod.validate(changed)
        except CmError as exc:
            first = first or exc
            continue
        return Change(key, before, candidate), changed
    assert first is not None
    raise first


def shown(value: object) -> str:
    """How ``cm config get`` prints a value: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
