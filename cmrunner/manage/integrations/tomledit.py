"""Entry-level edits of a shared TOML file (Codex's base ``config.toml``), keeping everything else.

Contract:
- An ``Entry`` is either a table at a dotted key path (``mcp_servers.common_memory``) or one item
  of an array of tables (a ``[[hooks.SessionStart]]`` group). Its identity for removal is its exact
  value: cm removes only an entry equal to what it recorded, so a user's edit is never discarded.
- ``add`` refuses a table key that already exists (``UNMANAGED_ENTRY``: cm never takes over an
  entry it did not write, even an identical one); array items are appended after the user's.
- ``remove`` deletes recorded entries; a recorded table whose value changed is
  ``HOST_FILE_MODIFIED``, an entry that is already gone is fine. Parent tables cm's removal left
  empty are dropped. Comments, order and formatting of everything else are kept (tomlkit).
- ``fingerprint`` is the sha256 of the entry's canonical JSON, what the manifest records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import tomlkit
from tomlkit.items import AoT, Table

from cmrunner.core.errors import CmError


@dataclass(frozen=True)
class Entry:
    key: tuple[str, ...]
    value: dict
    item: bool = False  # one item of an array of tables at ``key``
    fmt: str = "toml"   # the file's grammar: toml here, json or jsonc (``jsonedit``)
    # JSON: the entry's exact text as cm wrote it (``jsonedit.inserted``); not part of its identity
    text: str | None = field(default=None, compare=False)

    def fingerprint(self) -> str:
        return fingerprint(self.value)

    def as_json(self) -> dict:
        raw = {"key": list(self.key), "value": self.value, "item": self.item}
        if self.fmt != "toml":
            raw["format"] = self.fmt
        if self.text is not None:
            raw["text"] = self.text
        return raw

    @classmethod
    def from_json(cls, raw: dict) -> Entry:
        return cls(tuple(raw["key"]), raw["value"], bool(raw["item"]), raw.get("format", "toml"), raw.get("text"))


def fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _parse(text: str, path: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError:
        raise CmError("HOST_CONFIG_INVALID", f"{path} is not valid TOML; fix it first, nothing was changed") from None


def _walk(doc: tomlkit.TOMLDocument, key: tuple[str, ...], create: bool,
          path: str) -> Table | tomlkit.TOMLDocument | None:
    node: Table | tomlkit.TOMLDocument = doc
    for part in key:
        if part not in node:
            if not create:
                return None
            node.add(part, tomlkit.table(is_super_table=True))
        child = node[part]
        if not isinstance(child, Table):
            raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key)} in {path} is not a table; cm leaves it alone")
        node = child
    return node


def _toml_table(value: dict, spaced: bool = False) -> Table:
    table = tomlkit.table()
    for k, v in value.items():
        if isinstance(v, list) and v and all(isinstance(i, dict) for i in v):
            array = tomlkit.aot()
            for item in v:
                array.append(_toml_table(item, spaced))
            table.add(k, array)
        elif isinstance(v, dict):
            inline = tomlkit.inline_table()
            inline.update(v)
            table.add(k, inline)
        else:
            table.add(k, v)
    if spaced and not any(isinstance(v, list) and v and isinstance(v[0], dict) for v in value.values()):
        table.add(tomlkit.nl())  # a blank line after each leaf table keeps the file readable
    return table


def find(text: str, entry: Entry, path: str) -> int | None:
    """Where ``entry`` is (0 for a table, the index of an array item), or ``None`` if absent."""
    doc = _parse(text, path)
    parent = _walk(doc, entry.key[:-1], False, path)
    if parent is None or entry.key[-1] not in parent:
        return None
    node = parent[entry.key[-1]]
    if entry.item:
        if not isinstance(node, AoT):
            return None
        for index, item in enumerate(node):
            if item.unwrap() == entry.value:
                return index
        return None
    return 0 if isinstance(node, Table) and node.unwrap() == entry.value else None


def present_key(text: str, entry: Entry, path: str) -> bool:
    """Whether a table entry's key exists at all (with any value)."""
    doc = _parse(text, path)
    parent = _walk(doc, entry.key[:-1], False, path)
    return parent is not None and entry.key[-1] in parent


def add(text: str, entries: list[Entry], path: str) -> str:
    doc = _parse(text, path)
    for entry in entries:
        parent = _walk(doc, entry.key[:-1], True, path)
        assert parent is not None
        name = entry.key[-1]
        if entry.item:
            if name not in parent:
                parent.add(name, tomlkit.aot())
            node = parent[name]
            if not isinstance(node, AoT):
                raise CmError("UNMANAGED_ENTRY", f"{'.'.join(entry.key)} in {path} is not an array of tables; cm "
                                                 "leaves it alone")
            node.append(_toml_table(entry.value, spaced=True))
        else:
            if name in parent:
                raise CmError("UNMANAGED_ENTRY", f"{'.'.join(entry.key)} already exists in {path} and cm did not write "
                                                 "it; remove it by hand or keep managing it yourself")
            parent.add(name, _toml_table(entry.value))
    return tomlkit.dumps(doc)


def _drop_empty(doc: tomlkit.TOMLDocument, key: tuple[str, ...]) -> None:
    for depth in range(len(key), 0, -1):
        parent = _walk(doc, key[:depth - 1], False, "") if depth > 1 else doc
        if parent is None or key[depth - 1] not in parent:
            continue
        node = parent[key[depth - 1]]
        if (isinstance(node, (Table, AoT)) and len(node) == 0):
            del parent[key[depth - 1]]


def remove(text: str, entries: list[Entry], path: str) -> str:
    doc = _parse(text, path)
    for entry in entries:
        parent = _walk(doc, entry.key[:-1], False, path)
        name = entry.key[-1]
        if parent is None or name not in parent:
            continue
        node = parent[name]
        if entry.item:
            if isinstance(node, AoT):
                for index, item in enumerate(node):
                    if item.unwrap() == entry.value:
                        del node[index]
                        break
        else:
            if not isinstance(node, Table) or node.unwrap() != entry.value:
                raise CmError("HOST_FILE_MODIFIED", f"{'.'.join(entry.key)} in {path} was changed since cm wrote it; "
                                                    "restore or remove it by hand, nothing was changed")
            del parent[name]
        _drop_empty(doc, entry.key)
    text = tomlkit.dumps(doc)
    # Adding a table put a blank line before it; taking it away again should not leave that behind.
    return text.rstrip("\n") + "\n" if text.strip() else ""
