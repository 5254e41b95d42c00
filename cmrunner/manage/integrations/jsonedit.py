"""Entry-level edits of a host's JSON settings file (Claude Code, Gemini CLI), keeping every other byte.

Contract:
- The same ``Entry`` model as ``tomledit``: an object member at a key path
  (``mcpServers.common_memory``) or one item of an array at a key path (a ``hooks.Stop`` group).
  An entry's identity is its exact value (compared by ``tomledit.fingerprint``, so ``1``,
  ``1.0`` and ``true`` differ): cm removes only what equals what it recorded.
- Grammar: strict JSON, or with ``comments=True`` JSON with ``//`` and ``/* */`` comments, the way
  Gemini CLI reads its settings (comments stripped, then strict ``JSON.parse``: no trailing
  commas, no ``NaN``). The top level must be an object. Anything else is ``HOST_CONFIG_INVALID``
  naming the file; nothing is written.
- Every edit is a splice of the original text: bytes outside the inserted or removed member keep
  their comments, order, indentation and line endings. New members take the file's own indent
  unit (default two spaces). Added items go after the user's.
- ``add`` refuses an object member that already exists (``UNMANAGED_ENTRY``) and a path through
  something that is not an object or array (``UNMANAGED_ENTRY``); it reports the containers it
  created (``()``: the whole file). ``remove`` deletes recorded entries; a recorded member whose
  value changed is ``HOST_FILE_MODIFIED``, one already gone is fine; a container the removal left
  empty is dropped only if ``add`` created it, so a user's own ``"hooks": {}`` stays.
- ``add`` then ``remove`` of the same entries gives back the original bytes, except that an empty
  object or array written with blanks inside (``{ }``) comes back as ``{}``.

Why hand-written: the maintained JSONC editors on PyPI either run a Node.js daemon that installs
npm packages at first use (``jsonc-edit``) or expose an unstable model API for JSON5, a wider
grammar that would accept files the hosts refuse (``json-five``). This module validates with the
stdlib parser on the text with comments blanked out (offsets unchanged) and only locates spans
itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from cmrunner.core.errors import CmError
from cmrunner.manage.integrations.tomledit import Entry, fingerprint

_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_BLANKS = " \t\r\n"
# Strings first, so comment markers inside them are text; a lone "/*" is a comment never closed.
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|/\*', re.S)
_NOT_BREAK = re.compile(r"[^\r\n]")


@dataclass
class Node:
    start: int
    end: int
    kind: str  # "object", "array" or "scalar"
    keys: list[tuple[str, int]] = field(default_factory=list)  # object: (key, start of its quoted name)
    children: list[Node] = field(default_factory=list)          # object values or array items, in order

    def starts(self) -> list[int]:
        """Where each member (its quoted key) or item begins."""
        return [k[1] for k in self.keys] if self.kind == "object" else [c.start for c in self.children]

    def child(self, key: str) -> Node | None:
        found = None
        for (name, _start), value in zip(self.keys, self.children):
            if name == key:
                found = value  # the last duplicate wins, as in every JSON parser the hosts use
        return found


class Document:
    """A parsed settings text: the raw text, the same text with comments blanked, and its spans."""

    def __init__(self, text: str, path: str, comments: bool) -> None:
        self.path = path
        self.text = text if text.strip() else "{}\n"
        self.blank = _blank_comments(self.text, path, comments)
        try:
            self.data = json.loads(self.blank, parse_constant=_no_constant)
        except ValueError:
            raise _invalid(path, comments) from None
        if not isinstance(self.data, dict):
            raise CmError("HOST_CONFIG_INVALID", f"{path} does not hold a JSON object; fix it first, nothing was "
                                                 "changed")
        self.root = _parse(self.blank, _skip(self.blank, 0))
        self.nl = "\r\n" if "\r\n" in self.text else "\n"
        self.unit = self._unit()

    # -- layout -----------------------------------------------------------------------------

    def _line_indent(self, pos: int) -> str:
        begin = self.text.rfind("\n", 0, pos) + 1
        end = begin
        while end < len(self.text) and self.text[end] in " \t":
            end += 1
        return self.text[begin:end]

    def _on_own_line(self, node: Node) -> bool:
        starts = node.starts()
        return bool(starts) and "\n" in self.text[node.start:starts[0]]

    def _unit(self) -> str:
        if self._on_own_line(self.root):
            indent = self._line_indent(self.root.starts()[0])[len(self._line_indent(self.root.start)):]
            if indent:
                return indent
        return "  "

    def _inner_indent(self, node: Node) -> str:
        if self._on_own_line(node):
            return self._line_indent(node.starts()[0])
        return self._line_indent(node.start) + self.unit

    def render(self, value: object, into: Node) -> str:
        """``value`` laid out for ``into``: one line in a one-line container, else indented."""
        if into.children and "\n" not in self.text[into.start:into.end]:
            return json.dumps(value, ensure_ascii=False)
        indent = self._inner_indent(into)
        return json.dumps(value, indent=self.unit, ensure_ascii=False).replace("\n", self.nl + indent)

    def _content_end(self, pos: int) -> int:
        """The end of the last non-blank character (comments count) before ``pos``."""
        while pos > 0 and self.text[pos - 1] in _BLANKS:
            pos -= 1
        return pos

    # -- edits ------------------------------------------------------------------------------

    def insert(self, node: Node, piece: str) -> str:
        """The text with ``piece`` (a member ``"k": v`` or an item) appended to ``node``."""
        close = node.end - 1
        if not node.children:
            inside = self.text[node.start + 1:close]
            if not inside.strip(_BLANKS):  # empty: open it up on lines of its own
                indent = self._inner_indent(node)
                return (self.text[:node.start + 1] + self.nl + indent + piece + self.nl
                        + self._line_indent(node.start) + self.text[close:])
            at = self._content_end(close)  # only comments inside: go after them
            return self.text[:at] + self.nl + self._inner_indent(node) + piece + self.text[at:]
        last = node.children[-1].end
        if "\n" not in self.text[node.start:node.end]:  # a one-line container stays on one line
            return self.text[:last] + ", " + piece + self.text[last:]
        at = self._content_end(close)
        return (self.text[:last] + "," + self.text[last:at] + self.nl + self._inner_indent(node) + piece
                + self.text[at:])

    def delete(self, node: Node, index: int) -> str:
        """The text without member or item ``index`` of ``node`` (the inverse of ``insert``)."""
        starts = node.starts()
        start, end = starts[index], node.children[index].end
        if len(starts) == 1:
            rest = self.text[node.start + 1:start] + self.text[end:node.end - 1]
            if not rest.strip(_BLANKS):
                return self.text[:node.start + 1] + self.text[node.end - 1:]
            return self.text[:self._content_end(start)] + self.text[end:]
        if index + 1 < len(starts):  # up to the next member: our comma and the blanks after it
            comma = self.blank.index(",", end)
            after = comma + 1
            while after < len(self.text) and self.text[after] in _BLANKS:
                after += 1
            return self.text[:start] + self.text[after:]
        comma = self.blank.index(",", node.children[index - 1].end)
        begin = self._content_end(start)
        if begin == comma + 1:
            return self.text[:comma] + self.text[end:]
        return self.text[:comma] + self.text[comma + 1:begin] + self.text[end:]

    def walk(self, key: tuple[str, ...]) -> tuple[Node | None, object]:
        """The node and value at ``key`` (``None`` when absent); a non-object on the way is refused."""
        node: Node | None = self.root
        value: object = self.data
        for depth, part in enumerate(key):
            if not isinstance(value, dict) or node is None or node.kind != "object":
                raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key[:depth])} in {self.path} is not an object; cm "
                                                 "leaves it alone")
            if part not in value:
                return None, None
            node, value = node.child(part), value[part]
        return node, value


def _no_constant(name: str) -> object:
    raise ValueError(name)


def _invalid(path: str, comments: bool) -> CmError:
    grammar = "JSON (comments allowed, no trailing commas)" if comments else "strict JSON"
    return CmError("HOST_CONFIG_INVALID", f"{path} is not valid {grammar}; fix it first, nothing was changed")


def _blank_comments(text: str, path: str, comments: bool) -> str:
    """``text`` with every comment replaced by spaces (line breaks kept), so offsets stay put."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token[0] == '"':
            return token
        if not comments or token == "/*":  # a comment where none is allowed, or one never closed
            raise _invalid(path, comments)
        return _NOT_BREAK.sub(" ", token)

    return _TOKENS.sub(blank, text)


def _skip(blank: str, i: int) -> int:
    while i < len(blank) and blank[i] in _BLANKS:
        i += 1
    return i


def _parse(blank: str, i: int) -> Node:
    """Spans of the (already validated) JSON value at ``i``."""
    c = blank[i]
    if c == "{" or c == "[":
        node = Node(i, i, "object" if c == "{" else "array")
        i = _skip(blank, i + 1)
        closing = "}" if c == "{" else "]"
        while blank[i] != closing:
            if node.kind == "object":
                key, after = json.decoder.scanstring(blank, i + 1)  # type: ignore[attr-defined]
                node.keys.append((key, i))
                i = _skip(blank, _skip(blank, after) + 1)  # past the colon
            child = _parse(blank, i)
            node.children.append(child)
            i = _skip(blank, child.end)
            if blank[i] == ",":
                i = _skip(blank, i + 1)
        node.end = i + 1
        return node
    if c == '"':
        _value, end = json.decoder.scanstring(blank, i + 1)  # type: ignore[attr-defined]
        return Node(i, end, "scalar")
    match = _SCALAR.match(blank, i)
    assert match is not None  # the text was validated by json.loads
    return Node(i, match.end(), "scalar")


def parse(text: str, path: str, comments: bool) -> Document:
    return Document(text, path, comments)


def _same(a: object, b: object) -> bool:
    return fingerprint(a) == fingerprint(b)


def find(text: str, entry: Entry, path: str, comments: bool) -> int | None:
    """Where ``entry`` is (0 for a member, the index of an array item), or ``None`` if absent."""
    doc = parse(text, path, comments)
    _node, value = doc.walk(entry.key)
    if entry.item:
        if not isinstance(value, list):
            return None
        return next((i for i, item in enumerate(value) if _same(item, entry.value)), None)
    return 0 if value is not None and _same(value, entry.value) else None


def present_key(text: str, entry: Entry, path: str, comments: bool) -> bool:
    """Whether a member entry's key exists at all (with any value)."""
    node, _value = parse(text, path, comments).walk(entry.key)
    return node is not None


def _add_one(text: str, entry: Entry, path: str, comments: bool) -> tuple[str, list[tuple[str, ...]]]:
    doc = parse(text, path, comments)
    key = entry.key
    value: object = [entry.value] if entry.item else entry.value
    created: list[tuple[str, ...]] = [key] if entry.item else []
    for depth in range(len(key), 0, -1):  # the deepest part of the path that exists
        node, current = doc.walk(key[:depth - 1])
        if node is None:
            value = {key[depth - 1]: value}
            created.append(key[:depth - 1])
            continue
        if node.kind != "object" or not isinstance(current, dict):
            raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key[:depth - 1])} in {path} is not an object; cm leaves "
                                             "it alone")
        name = key[depth - 1]
        if name in current:
            existing = node.child(name)
            assert existing is not None
            if depth == len(key) and entry.item:
                if existing.kind != "array":
                    raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key)} in {path} is not an array; cm leaves it "
                                                     "alone")
                return doc.insert(existing, doc.render(entry.value, existing)), []
            raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key[:depth])} already exists in {path} and cm did not "
                                             "write it; remove it by hand or keep managing it yourself")
        member = json.dumps(name, ensure_ascii=False) + ": " + doc.render(value, node)
        return doc.insert(node, member), created
    raise AssertionError("unreachable: the root always exists")


def add(text: str, entries: list[Entry], path: str, comments: bool) -> tuple[str, set[tuple[str, ...]]]:
    """``text`` with ``entries`` added (see module contract), and the key paths of the containers
    the additions created (``()`` when the text was empty: cm made the file), for ``remove``."""
    created: set[tuple[str, ...]] = set()
    if not text.strip():
        text, created = "{}\n", {()}
    for entry in entries:
        text, made = _add_one(text, entry, path, comments)
        created.update(made)
    return text, created


def _drop(doc: Document, key: tuple[str, ...], created: set[tuple[str, ...]]) -> str:
    """Delete the member at ``key``, then every parent cm created that this leaves empty."""
    text = doc.text
    while key:
        parent, _value = doc.walk(key[:-1])
        assert parent is not None
        index = max(i for i, (name, _s) in enumerate(parent.keys) if name == key[-1])
        text = doc.delete(parent, index)
        doc = parse(text, doc.path, True)
        key = key[:-1]
        _node, value = doc.walk(key)
        if not key or value or key not in created:
            break
    return text


def remove(text: str, entries: list[Entry], path: str, comments: bool,
           created: set[tuple[str, ...]] = frozenset()) -> str:  # type: ignore[assignment]
    """``text`` without ``entries``; containers left empty go only if ``add`` created them."""
    if not text.strip():
        return text
    for number, entry in enumerate(entries):
        # The file itself must be valid before anything is taken out; cm's own edits keep it so.
        doc = parse(text, path, comments if number == 0 else True)
        node, value = doc.walk(entry.key)
        if node is None:
            continue
        if entry.item:
            if not isinstance(value, list):
                continue
            index = next((i for i, item in enumerate(value) if _same(item, entry.value)), None)
            if index is None:
                continue
            # cm's item alone in an array cm created: the array goes too
            alone = len(value) == 1 and entry.key in created
            text = _drop(doc, entry.key, created) if alone else doc.delete(node, index)
        else:
            if not _same(value, entry.value):
                raise CmError("HOST_FILE_MODIFIED", f"{'.'.join(entry.key)} in {path} was changed since cm wrote it; "
                                                    "restore or remove it by hand, nothing was changed")
            text = _drop(doc, entry.key, created)
    return text


def is_empty(text: str) -> bool:
    """Whether the text holds nothing but an empty object (no member, no comment)."""
    return text.strip(_BLANKS) in ("", "{}")


def existing(text: str, keys: set[tuple[str, ...]], path: str, comments: bool) -> set[tuple[str, ...]]:
    """The key paths in ``keys`` that are still there (``()``, the file, while it has text)."""
    if not text.strip():
        return set()
    doc = parse(text, path, comments)
    found = set()
    for key in keys:
        try:
            node, _value = doc.walk(key)
        except CmError:
            continue
        if node is not None:
            found.add(key)
    return found
