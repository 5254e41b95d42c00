"""Entry-level edits of a host's JSON settings file (Claude Code, Gemini CLI), keeping every other byte.

Contract:
- The same ``Entry`` model as ``tomledit``: an object member at a key path
  (``mcpServers.common_memory``) or one item of an array at a key path (a ``hooks.Stop`` group).
  An entry's identity is its exact value (compared by ``tomledit.fingerprint``, so ``1``,
  ``1.0`` and ``true`` differ): cm removes only what equals what it recorded.
- Grammar: strict JSON, or with ``comments=True`` JSON with ``//`` and ``/* */`` comments, the way
  Gemini CLI reads its settings (comments stripped, then strict ``JSON.parse``: no trailing
  commas, no ``NaN``). A UTF-8 byte order mark before the text is accepted, as the hosts accept
  it, and kept: edits are splices after it. The top level must be an object. Anything else is
  ``HOST_CONFIG_INVALID`` naming the file; nothing is written.
- Every edit is a splice of the original text: bytes outside the inserted or removed member keep
  their comments, order, indentation and line endings. New members take the file's own indent
  unit (default two spaces). Added items go after the user's.
- ``add`` refuses an object member that already exists (``UNMANAGED_ENTRY``) and a path through
  something that is not an object or array (``UNMANAGED_ENTRY``); it reports the containers it
  created (``()``: the text was blank, cm made the object). ``inserted`` also gives the exact
  text of each entry as it now sits in the file, for the manifest. ``remove`` deletes recorded
  entries; a recorded member whose value changed is ``HOST_FILE_MODIFIED``, one already gone is
  fine; of several identical items the one whose text is the recorded text goes, else the last
  (cm appends after the user's). A container the removal left empty is dropped only if ``add``
  created it, so a user's own ``"hooks": {}`` stays.
- ``add`` then ``remove`` of the same entries gives back the original bytes, except that an empty
  object or array written with blanks inside (``{ }``) comes back as ``{}``.
- Cost is linear in the file's size whatever its size (Claude Code's ``~/.claude.json`` grows to
  many MB): a parse is one pass of the stdlib's C decoder over the top-level members, and only
  the containers on an entry's key path are ever split into members; an edit's result is parsed
  from its parent's spans (only the top-level value it touched is decoded again), and the last
  two parses are reused while the text is the same.

Why hand-written: the maintained JSONC editors on PyPI either run a Node.js daemon that installs
npm packages at first use (``jsonc-edit``) or expose an unstable model API for JSON5, a wider
grammar that would accept files the hosts refuse (``json-five``). This module validates with the
stdlib decoder on the text with comments blanked out (offsets unchanged) and only locates spans
itself.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict

from cmrunner.core.errors import CmError
from cmrunner.manage.integrations.tomledit import Entry, fingerprint

BOM = "\ufeff"
_BLANKS = " \t\r\n"
# Everything up to the next comment: text without quotes or slashes, and whole strings.
_NOT_COMMENT = re.compile(r'[^"/]*(?:"(?:[^"\\\n]|\\.)*"[^"/]*)*')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_NON_BLANK = re.compile(r"[^ \t\r\n]")
_EMPTY = re.compile("\ufeff?[ \t\r\n]*(?:\\{\\})?[ \t\r\n]*")
_NOT_BREAK = re.compile(r"[^\r\n]")
_SCAN_STRING = json.decoder.scanstring  # type: ignore[attr-defined]
_CACHE_SIZE = 2  # a plan edits one file at a time: its text and the latest edit


class Node:
    """A value's span in the (blanked) text; a container's members are located on first use."""

    __slots__ = ("blank", "start", "end", "kind", "_keys", "_children")

    def __init__(self, blank: str, start: int, end: int) -> None:
        self.blank = blank
        self.start = start
        self.end = end
        first = blank[start]
        self.kind = "object" if first == "{" else "array" if first == "[" else "scalar"
        self._keys: list[tuple[str, int]] | None = None
        self._children: list[Node] | None = None

    def _scan(self) -> None:
        if self._children is None:
            self._keys, self._children, _end = _members(self.blank, self.start, self.kind)

    @property
    def keys(self) -> list[tuple[str, int]]:
        """Object: ``(key, start of its quoted name)`` of each member, in order."""
        self._scan()
        assert self._keys is not None
        return self._keys

    @property
    def children(self) -> list[Node]:
        """Object values or array items, in order."""
        self._scan()
        assert self._children is not None
        return self._children

    def starts(self) -> list[int]:
        """Where each member (its quoted key) or item begins."""
        return [k[1] for k in self.keys] if self.kind == "object" else [c.start for c in self.children]

    def child(self, key: str) -> Node | None:
        found = None
        for (name, _start), value in zip(self.keys, self.children):
            if name == key:
                found = value  # the last duplicate wins, as in every JSON parser the hosts use
        return found

    def value(self) -> object:
        """The decoded value (only ever asked of cm's entries and their small containers)."""
        return _DECODER.raw_decode(self.blank, self.start)[0]


class Document:
    """A parsed settings text: the raw text, the same text with comments blanked, and its spans."""

    def __init__(self, text: str, path: str, comments: bool, known: dict[int, int] | None = None) -> None:
        self.path = path
        self.comments = comments
        self.text = text if not is_blank(text) else bom_of(text) + "{}\n"
        blank = self.text if not comments or "/" not in self.text else _blank_comments(self.text, path, comments)
        if blank.startswith(BOM):
            blank = " " + blank[1:]  # same length: offsets in ``blank`` are offsets in ``text``
        self.blank = blank
        self.root = _root(blank, path, comments, known or {})
        self.nl = "\r\n" if "\r\n" in self.text else "\n"
        self.unit = self._unit()

    # -- layout -----------------------------------------------------------------------------

    def _line_indent(self, pos: int) -> str:
        begin = self.text.rfind("\n", 0, pos) + 1
        end = begin
        while end < len(self.text) and self.text[end] in " \t":
            end += 1
        return self.text[begin:end].lstrip(BOM)

    def _has_break(self, start: int, end: int) -> bool:
        return self.text.find("\n", start, end) >= 0

    def _on_own_line(self, node: Node) -> bool:
        starts = node.starts()
        return bool(starts) and self._has_break(node.start, starts[0])

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
        if into.children and not self._has_break(into.start, into.end):
            return json.dumps(value, ensure_ascii=False)
        indent = self._inner_indent(into)
        return json.dumps(value, indent=self.unit, ensure_ascii=False).replace("\n", self.nl + indent)

    def _content_end(self, pos: int) -> int:
        """The end of the last non-blank character (comments count) before ``pos``."""
        while pos > 0 and self.text[pos - 1] in _BLANKS:
            pos -= 1
        return pos

    # -- edits ------------------------------------------------------------------------------

    def _splice(self, start: int, end: int, piece: str) -> str:
        """``text`` with ``[start, end)`` replaced by ``piece``; the new text's parse is derived and
        remembered: top-level values outside the replaced span keep their (shifted) spans, so only
        the one the edit touched is decoded again."""
        text = self.text[:start] + piece + self.text[end:]
        delta = len(piece) - (end - start)
        known = {}
        for child in self.root.children:
            if child.end <= start:
                known[child.start] = child.end
            elif child.start >= end:
                known[child.start + delta] = child.end + delta
        _remember(Document(text, self.path, self.comments, known))
        return text

    def insert(self, node: Node, piece: str) -> str:
        """The text with ``piece`` (a member ``"k": v`` or an item) appended to ``node``."""
        close = node.end - 1
        if not node.children:
            inside = self.text[node.start + 1:close]
            if not inside.strip(_BLANKS):  # empty: open it up on lines of its own
                indent = self._inner_indent(node)
                return self._splice(node.start + 1, close,
                                    self.nl + indent + piece + self.nl + self._line_indent(node.start))
            at = self._content_end(close)  # only comments inside: go after them
            return self._splice(at, at, self.nl + self._inner_indent(node) + piece)
        last = node.children[-1].end
        if not self._has_break(node.start, node.end):  # a one-line container stays on one line
            return self._splice(last, last, ", " + piece)
        at = self._content_end(close)
        return self._splice(last, at, "," + self.text[last:at] + self.nl + self._inner_indent(node) + piece)

    def delete(self, node: Node, index: int) -> str:
        """The text without member or item ``index`` of ``node`` (the inverse of ``insert``)."""
        starts = node.starts()
        start, end = starts[index], node.children[index].end
        if len(starts) == 1:
            rest = self.text[node.start + 1:start] + self.text[end:node.end - 1]
            if not rest.strip(_BLANKS):
                return self._splice(node.start + 1, node.end - 1, "")
            return self._splice(self._content_end(start), end, "")
        if index + 1 < len(starts):  # up to the next member: our comma and the blanks after it
            comma = self.blank.index(",", end)
            after = comma + 1
            while after < len(self.text) and self.text[after] in _BLANKS:
                after += 1
            return self._splice(start, after, "")
        comma = self.blank.index(",", node.children[index - 1].end)
        begin = self._content_end(start)
        return self._splice(comma, end, self.text[comma + 1:begin])

    def walk(self, key: tuple[str, ...]) -> Node | None:
        """The node at ``key`` (``None`` when absent); a non-object on the way is refused."""
        node = self.root
        for depth, part in enumerate(key):
            if node.kind != "object":
                raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key[:depth])} in {self.path} is not an object; cm "
                                                 "leaves it alone")
            child = node.child(part)
            if child is None:
                return None
            node = child
        return node


def _no_constant(name: str) -> object:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _invalid(path: str, comments: bool) -> CmError:
    grammar = "JSON (comments allowed, no trailing commas)" if comments else "strict JSON"
    return CmError("HOST_CONFIG_INVALID", f"{path} is not valid {grammar}; fix it first, nothing was changed")


def _blank_comments(text: str, path: str, comments: bool) -> str:
    """``text`` with every comment replaced by spaces (line breaks kept), so offsets stay put.

    The regular expression engine skips everything between comments (strings included), so the
    Python loop runs once per comment, not once per string."""
    pieces = []
    i = 0
    while True:
        end = _NOT_COMMENT.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string
        pieces.append(text[i:end])
        if end == len(text):
            return "".join(pieces)
        comment = _COMMENT.match(text, end)
        if comment is None or not comments:  # a quote never closed, a lone slash, a comment not allowed
            raise _invalid(path, comments)
        pieces.append(_NOT_BREAK.sub(" ", comment.group(0)))
        i = comment.end()


def _skip(blank: str, i: int) -> int:
    while i < len(blank) and blank[i] in _BLANKS:
        i += 1
    return i


def _members(blank: str, start: int, kind: str, known: dict[int, int] | None = None
             ) -> tuple[list[tuple[str, int]], list[Node], int]:
    """The members (or items) of the container at ``start`` and the end of the container.

    Each value is run through the stdlib's C decoder, which both validates it and finds its end,
    so locating the members of an object is one C pass over it plus a Python step per member.
    ``known`` gives the end of values already validated at those starts (``Document._splice``).
    A ``ValueError`` or ``IndexError`` means the text is not JSON.
    """
    closing = "}" if kind == "object" else "]"
    keys: list[tuple[str, int]] = []
    children: list[Node] = []
    i = _skip(blank, start + 1)
    if blank[i] == closing:
        return keys, children, i + 1
    while True:
        if kind == "object":
            if blank[i] != '"':
                raise ValueError("expected a member name")
            key, after = _SCAN_STRING(blank, i + 1)
            keys.append((key, i))
            i = _skip(blank, after)
            if blank[i] != ":":
                raise ValueError("expected a colon")
            i = _skip(blank, i + 1)
        end = known.get(i, 0) if known else 0
        if not end:
            _value, end = _DECODER.raw_decode(blank, i)
        children.append(Node(blank, i, end))
        i = _skip(blank, end)
        if blank[i] == ",":
            i = _skip(blank, i + 1)
        elif blank[i] == closing:
            return keys, children, i + 1
        else:
            raise ValueError("expected a comma")


def _root(blank: str, path: str, comments: bool, known: dict[int, int]) -> Node:
    """The validated top-level object (what ``json.loads`` accepts, and an object)."""
    i = _skip(blank, 0)
    try:
        if i < len(blank) and blank[i] == "{":
            keys, children, end = _members(blank, i, "object", known)
            if _skip(blank, end) != len(blank):
                raise ValueError("extra data")
            node = Node(blank, i, end)
            node._keys, node._children = keys, children
            return node
        _DECODER.decode(blank)
    except (ValueError, IndexError):
        raise _invalid(path, comments) from None
    raise CmError("HOST_CONFIG_INVALID", f"{path} does not hold a JSON object; fix it first, nothing was changed")


_cache: OrderedDict[tuple[str, str, bool], Document] = OrderedDict()


def _remember(doc: Document) -> None:
    _cache[(doc.text, doc.path, doc.comments)] = doc
    _cache.move_to_end((doc.text, doc.path, doc.comments))
    while len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)


def parse(text: str, path: str, comments: bool) -> Document:
    """The parsed text; the last few parses are kept, as one plan looks at the same text often."""
    key = (text, path, comments)
    doc = _cache.get(key)
    if doc is None:
        doc = Document(text, path, comments)
        _cache[key] = doc
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return doc


def bom_of(text: str) -> str:
    return BOM if text.startswith(BOM) else ""


def is_blank(text: str) -> bool:
    """Whether the text holds nothing at all (blanks, perhaps after a byte order mark)."""
    return _NON_BLANK.search(text, len(bom_of(text))) is None


def _same(a: object, b: object) -> bool:
    return fingerprint(a) == fingerprint(b)


def _matches(node: Node, entry: Entry) -> list[int]:
    """The indexes of the items of array ``node`` equal to ``entry``'s value."""
    if node.kind != "array":
        return []
    return [i for i, item in enumerate(node.children) if _same(item.value(), entry.value)]


def find(text: str, entry: Entry, path: str, comments: bool) -> int | None:
    """Where ``entry`` is (0 for a member, the index of an array item), or ``None`` if absent."""
    doc = parse(text, path, comments)
    node = doc.walk(entry.key)
    if node is None:
        return None
    if entry.item:
        found = _matches(node, entry)
        return found[0] if found else None
    value = node.value()
    return 0 if value is not None and _same(value, entry.value) else None


def present_key(text: str, entry: Entry, path: str, comments: bool) -> bool:
    """Whether a member entry's key exists at all (with any value)."""
    return parse(text, path, comments).walk(entry.key) is not None


def _add_one(text: str, entry: Entry, path: str, comments: bool) -> tuple[str, list[tuple[str, ...]]]:
    doc = parse(text, path, comments)
    key = entry.key
    value: object = [entry.value] if entry.item else entry.value
    created: list[tuple[str, ...]] = [key] if entry.item else []
    for depth in range(len(key), 0, -1):  # the deepest part of the path that exists
        node = doc.walk(key[:depth - 1])
        if node is None:
            value = {key[depth - 1]: value}
            created.append(key[:depth - 1])
            continue
        if node.kind != "object":
            raise CmError("UNMANAGED_ENTRY", f"{'.'.join(key[:depth - 1])} in {path} is not an object; cm leaves "
                                             "it alone")
        name = key[depth - 1]
        existing = node.child(name)
        if existing is not None:
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
    the additions created (``()`` when the text was blank: cm made the object), for ``remove``."""
    created: set[tuple[str, ...]] = set()
    if is_blank(text):
        text, created = bom_of(text) + "{}\n", {()}
    for entry in entries:
        text, made = _add_one(text, entry, path, comments)
        created.update(made)
    return text, created


def inserted(text: str, entries: list[Entry], path: str, comments: bool) -> list[str]:
    """The exact text of each of ``entries`` in ``text`` (just added: an item is the last equal one)."""
    doc = parse(text, path, comments)
    texts = []
    for entry in entries:
        node = doc.walk(entry.key)
        assert node is not None
        if entry.item:
            node = node.children[_matches(node, entry)[-1]]
        texts.append(doc.text[node.start:node.end])
    return texts


def _drop(doc: Document, key: tuple[str, ...], created: set[tuple[str, ...]]) -> str:
    """Delete the member at ``key``, then every parent cm created that this leaves empty."""
    text = doc.text
    while key:
        parent = doc.walk(key[:-1])
        assert parent is not None
        index = max(i for i, (name, _s) in enumerate(parent.keys) if name == key[-1])
        text = doc.delete(parent, index)
        doc = parse(text, doc.path, doc.comments)
        key = key[:-1]
        if not key or key not in created:
            break
        node = doc.walk(key)
        if node is None or node.kind == "scalar" or node.children:
            break
    return text


def remove(text: str, entries: list[Entry], path: str, comments: bool,
           created: set[tuple[str, ...]] = frozenset()) -> str:  # type: ignore[assignment]
    """``text`` without ``entries``; containers left empty go only if ``add`` created them."""
    if is_blank(text):
        return text
    for entry in entries:
        doc = parse(text, path, comments)
        node = doc.walk(entry.key)
        if node is None:
            continue
        if entry.item:
            found = _matches(node, entry)
            if not found:
                continue
            exact = [i for i in found if doc.text[node.children[i].start:node.children[i].end] == entry.text]
            index = (exact or found)[-1]
            # cm's item alone in an array cm created: the array goes too
            alone = len(node.children) == 1 and entry.key in created
            text = _drop(doc, entry.key, created) if alone else doc.delete(node, index)
        else:
            if not _same(node.value(), entry.value):
                raise CmError("HOST_FILE_MODIFIED", f"{'.'.join(entry.key)} in {path} was changed since cm wrote it; "
                                                    "restore or remove it by hand, nothing was changed")
            text = _drop(doc, entry.key, created)
    return text


def is_empty(text: str) -> bool:
    """Whether the text holds nothing but an empty object (no member, no comment)."""
    return _EMPTY.fullmatch(text) is not None


def existing(text: str, keys: set[tuple[str, ...]], path: str, comments: bool) -> set[tuple[str, ...]]:
    """The key paths in ``keys`` that are still there (``()``, the file, while it has text)."""
    if is_blank(text):
        return set()
    doc = parse(text, path, comments)
    found = set()
    for key in keys:
        try:
            node = doc.walk(key)
        except CmError:
            continue
        if node is not None:
            found.add(key)
    return found
