"""docs/architecture.md stays true: every module it names is where it says, every function or class
it names after a colon is defined there, and every room it lists exists with a docstring."""

from __future__ import annotations

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "architecture.md")
SOURCE_ROOTS = ("", "cmrunner")  # `core/x.py` is short for `cmrunner/core/x.py`
NAMED = re.compile(r"`([A-Za-z_][\w/.-]*\.(?:py|ts))(?::([A-Za-z_]\w*))?`")
ROOM = re.compile(r"^\| `((?:cmrunner/)?[a-z_]+/)`", re.M)


def _source_files() -> list[str]:
    found = []
    for top in ("cmrunner", "writer_proc", "hooks", "bridge", "tests", "bench"):
        for folder, _dirs, files in os.walk(os.path.join(REPO, top)):
            found += [os.path.relpath(os.path.join(folder, f), REPO) for f in files if f.endswith((".py", ".ts"))]
    return found


def _resolve(name: str, files: list[str]) -> str:
    if "/" in name:
        for root in SOURCE_ROOTS:
            candidate = os.path.join(root, name)
            if os.path.isfile(os.path.join(REPO, candidate)):
                return candidate
        raise AssertionError(f"docs/architecture.md names {name}, which does not exist")
    matches = [f for f in files if os.path.basename(f) == name]
    production = [f for f in matches if not f.startswith(("tests", "bench"))]
    matches = production or matches
    assert len(matches) == 1, f"docs/architecture.md names {name}: {matches or 'no such module'}"
    return matches[0]


def _defines(path: str, symbol: str) -> bool:
    tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read())
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == symbol
               for node in ast.walk(tree))


def test_every_named_module_and_symbol_exists():
    text = open(DOC, encoding="utf-8").read()
    files = _source_files()
    named = NAMED.findall(text)
    assert len(named) > 50, "the scan really read the page"
    for name, symbol in named:
        path = _resolve(name, files)
        if symbol and path.endswith(".py"):
            assert _defines(path, symbol), f"docs/architecture.md names {name}:{symbol}, which {path} does not define"


def test_every_room_exists_and_says_what_it_is_for():
    text = open(DOC, encoding="utf-8").read()
    rooms = ROOM.findall(text)
    assert {"cmrunner/core/", "cmrunner/capture/", "cmrunner/mcpserver/", "cmrunner/manage/", "cmrunner/views/",
            "cmrunner/commands/", "cmrunner/tui/", "writer_proc/", "hooks/"} <= set(rooms)
    for room in rooms:
        init = os.path.join(REPO, room, "__init__.py")
        assert os.path.isfile(init), f"{room} is named as a room but has no __init__.py"
        doc = ast.get_docstring(ast.parse(open(init, encoding="utf-8").read()))
        assert doc and len(doc) > 40, f"{room}__init__.py must say what the room is for"
    packages = {d for d in os.listdir(os.path.join(REPO, "cmrunner"))
                if os.path.isfile(os.path.join(REPO, "cmrunner", d, "__init__.py"))}
    assert {f"cmrunner/{p}/" for p in packages} <= set(rooms), "every package of cmrunner is a room on the page"
