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


# -- the rooms table and the import contracts say the same thing -----------------------------------

ROW = re.compile(r"^\| (`[^|]+) \| (?:[^|\\]|\\.)* \| ([^|]*) \|$", re.M)  # a cell may hold an escaped pipe
ROOM_NAME = re.compile(r"`(?:cmrunner/)?([a-z_]+)(?:/|\.py)`")


def _table() -> tuple[list[str], dict[str, set[str]]]:
    """The rooms top to bottom (as modules) and the rooms each may import, as the table says."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    rows = [([f"cmrunner.{m}" for m in ROOM_NAME.findall(first.split(" (")[0])], may)
            for first, may in ROW.findall(section)]
    order = [module for modules, _may in rows for module in modules]
    allowed: dict[str, set[str]] = {}
    for modules, may in rows:
        rooms = re.sub(r"\([^)]*\)", "", may).split(";")[0].strip()
        for module in modules:
            below = order[order.index(module) + 1:]
            if rooms in ("everything below", "every room below"):
                allowed[module] = set(below)
            elif rooms == "the standard library":
                allowed[module] = set()
            else:
                named = [f"cmrunner.{name.strip()}" for name in rooms.removesuffix(" and below").replace(" and ", ", ")
                         .split(",")]
                assert set(named) <= set(order), (module, named)
                allowed[module] = set(named) | (set(order[order.index(named[-1]) + 1:])
                                                if rooms.endswith(" and below") else set())
    return order, allowed


def test_the_import_contracts_state_exactly_the_rooms_table():
    import tomllib

    order, allowed = _table()
    assert len(order) >= 13 and order[0] == "cmrunner.entry" and order[-1] == "cmrunner.core", order
    contracts = tomllib.load(open(os.path.join(REPO, "pyproject.toml"), "rb"))["tool"]["importlinter"]["contracts"]
    [layers] = [c for c in contracts if c["type"] == "layers"]
    assert layers["layers"] == order, "the layers contract lists the table's rooms in its order"
    forbidden: dict[str, set[str]] = {}
    for contract in contracts:
        if contract["type"] == "forbidden":
            assert contract.get("allow_indirect_imports") is True, "the table is about direct imports"
            [source] = contract["source_modules"]
            assert source not in forbidden, f"one forbidden contract per room: {source}"
            forbidden[source] = set(contract["forbidden_modules"])
    for module in order:
        below = set(order[order.index(module) + 1:])
        assert forbidden.get(module, set()) <= below, f"{module}: forbid only rooms the layers would allow"
        assert below - forbidden.get(module, set()) == allowed[module], \
            f"{module}: the contracts let it import other rooms than the table's 'may import' column"
