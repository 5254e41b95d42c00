"""Where a key of a TOML document is written: the line behind a validation error's location.

Contract:
- ``key_lines(text)`` maps key paths to 1-based line numbers: ``("title",)``, ``("sessions", 1,
  "project")`` for the second ``[[sessions]]`` table's ``project``, ``("sessions", 0, "turns", 2)``
  for the third element of a multi-line array when that element starts its own line. Table
  headers (``[a]``, ``[[a.b]]``) count array-of-table indexes the way TOML does; a header's own path
  maps to its line.
- ``line_of(lines, loc)`` is the line of the longest prefix of ``loc`` that was recorded, so an
  error inside an inline table or a one-line array points at its key's line; 1 when nothing matches.
- It reads strings (basic, literal, multi-line), comments and brackets well enough to find keys in
  a document ``tomllib`` already accepted; it is never used to parse values.
"""

from __future__ import annotations

import re

Path = tuple[str | int, ...]
_BARE_KEY = re.compile(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(\s*\.\s*([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*\s*=")


def _key_path(raw: str) -> tuple[str, ...]:
    parts = re.findall(r"[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'", raw)
    return tuple(p.strip("\"'") for p in parts)


class _Frame:
    """An open array or inline table: the path of its value, and where the next element goes."""

    __slots__ = ("path", "array", "index", "expect")

    def __init__(self, path: Path, array: bool) -> None:
        self.path = path
        self.array = array
        self.index = 0
        self.expect = True  # a key (inline table) or an element (array) comes next


class _Scanner:
    """Walks the text once, tracking strings, comments and bracket depth."""

    def __init__(self, text: str) -> None:
        self.lines: dict[Path, int] = {}
        self.table: Path = ()
        self.counts: dict[Path, int] = {}
        self.text = text

    def record(self, path: Path, line: int) -> None:
        self.lines.setdefault(path, line)

    def header(self, raw: str, array: bool, line: int) -> None:
        path: Path = ()
        names = _key_path(raw)
        for i, name in enumerate(names):
            path = (*path, name)
            if i < len(names) - 1 and path in self.counts:
                path = (*path, self.counts[path] - 1)  # a dotted header continues the latest table of an array
        if array:
            index = self.counts.get(path, 0)
            self.counts[path] = index + 1
            path = (*path, index)
        self.table = path
        self.record(path, line)

    def skip_string(self, i: int) -> tuple[int, int]:
        """The index after the string starting at ``i``, and the newlines it spans."""
        text, c = self.text, self.text[i]
        quote = c * 3 if text.startswith(c * 3, i) else c
        j, newlines = i + len(quote), 0
        while j < len(text) and not text.startswith(quote, j):
            if text[j] == "\\" and c == '"':
                j += 1
            elif text[j] == "\n":
                newlines += 1
            j += 1
        return j + len(quote), newlines

    def scan(self) -> dict[Path, int]:
        text, i, line = self.text, 0, 1
        frames: list[_Frame] = []
        value_path: Path = ()
        at_line_start = True
        while i < len(text):
            c = text[i]
            if c == "\n":
                line, at_line_start, i = line + 1, True, i + 1
                continue
            if c in " \t\r":
                i += 1
                continue
            if c == "#":
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
                continue
            top = frames[-1] if frames else None
            if top is None and at_line_start and c == "[":
                array = text.startswith("[[", i)
                end = text.find("]]" if array else "]", i)
                self.header(text[i + (2 if array else 1):end], array, line)
                i, at_line_start = end + (2 if array else 1), False
                continue
            if (top is None and at_line_start) or (top is not None and not top.array and top.expect):
                match = _BARE_KEY.match(text, i)
                if match:
                    value_path = (*(self.table if top is None else top.path), *_key_path(match.group(0)[:-1]))
                    self.record(value_path, line)
                    if top is not None:
                        top.expect = False
                    i, at_line_start = match.end(), False
                    continue
            at_line_start = False
            if top is not None and top.array and top.expect and c not in ",]":
                value_path = (*top.path, top.index)
                self.record(value_path, line)
                top.index, top.expect = top.index + 1, False
            if c == ",":
                if top is not None:
                    top.expect = True
            elif c in "[{":
                frames.append(_Frame(value_path, c == "["))
            elif c in "]}":
                if frames:
                    frames.pop()
            elif c in "\"'":
                i, newlines = self.skip_string(i)
                line += newlines
                continue
            i += 1
        return self.lines


def key_lines(text: str) -> dict[Path, int]:
    return _Scanner(text).scan()


def line_of(lines: dict[Path, int], loc: Path) -> int:
    for size in range(len(loc), 0, -1):
        found = lines.get(tuple(loc[:size]))
        if found is not None:
            return found
    return 1
