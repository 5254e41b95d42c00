"""`cm eval` worlds: the committed schema is the model's, every shipped world validates, and bad
world files get a code with the file and the line."""

from __future__ import annotations

import json
import os
import tomllib
from importlib import resources

import jsonschema
import pytest
from conftest import run_cm

from cmrunner.core.errors import CmError
from cmrunner.evals import world as world_mod

SCHEMAS = resources.files("cmrunner.evals")
REGENERATE = ("regenerate with: python -c \"import json; from cmrunner.evals import world; "
              "print(json.dumps(world.json_schema(), indent=2, sort_keys=True))\" > cmrunner/evals/world.schema.json")


def test_the_committed_world_schema_is_the_models_schema():
    committed = json.loads((SCHEMAS / "world.schema.json").read_text(encoding="utf-8"))
    assert committed == world_mod.json_schema(), REGENERATE


@pytest.mark.parametrize("path", world_mod.shipped_paths(), ids=os.path.basename)
def test_every_shipped_world_validates_against_the_committed_schema(path):
    schema = json.loads((SCHEMAS / "world.schema.json").read_text(encoding="utf-8"))
    with open(path, "rb") as handle:
        raw = tomllib.load(handle)
    jsonschema.validate(raw, schema)
    assert world_mod.load(path).id == raw["id"]


def test_the_suite_covers_every_violation_class_twice_and_every_capability():
    worlds = world_mod.shipped()
    assert len(worlds) >= 24
    assert len({w.id for w in worlds}) == len(worlds)
    for name in world_mod.VIOLATIONS:
        assert sum(name in w.classes for w in worlds) >= 2, name
    for name in world_mod.CAPABILITIES:
        assert any(name in w.classes for w in worlds), name
    # cross-project isolation is tested with two projects, imports and pasted content both appear
    assert any(len(w.projects) >= 2 for w in worlds if "isolation" in w.classes)
    assert any(s.import_ is not None for w in worlds for s in w.sessions)
    assert any("```" in t.user or "\n>" in t.user for w in worlds for s in w.sessions for t in s.turns)


GOOD = """id = "mine"
title = "a world of my own"
classes = ["remember"]

[[sessions]]
turns = [{ user = "I use Neovim as my editor." }]

[[checks]]
kind = "present"
class = "remember"
where = "preferences"
pattern = "Neovim"
"""


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "world.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _error(tmp_path, text: str) -> CmError:
    with pytest.raises(CmError) as caught:
        world_mod.load(_write(tmp_path, text))
    return caught.value


def test_a_good_world_file_loads(tmp_path):
    world = world_mod.load(_write(tmp_path, GOOD))
    assert world.id == "mine" and world.user_turns == 1 and world.checks[0].kind == "present"


def test_a_file_that_is_not_toml_names_the_file_and_line(tmp_path):
    err = _error(tmp_path, GOOD.replace('title = "a world of my own"', 'title = "unclosed'))
    assert err.code == "WORLD_PARSE_ERROR"
    assert str(tmp_path / "world.toml") in err.message and "line 2" in err.message


def test_an_unknown_check_names_the_line_of_its_kind_and_the_accepted_kinds(tmp_path):
    err = _error(tmp_path, GOOD.replace('kind = "present"', 'kind = "presnt"'))
    assert err.code == "WORLD_INVALID"
    assert err.message.startswith(f"{tmp_path / 'world.toml'}:9: checks[0].kind must be one of present, absent,")
    assert "judge" in err.message


@pytest.mark.parametrize(("change", "line", "words"), [
    (('classes = ["remember"]', 'classes = ["remember"]\ncontext = "yes"'), 4, "context"),
    (('where = "preferences"', 'where = "preferences"\ncolour = "blue"'), 12, "checks[0].colour is not a known key"),
    (('pattern = "Neovim"', 'pattern = "Neo(vim"'), 12, "checks[0].pattern must be a valid regular expression"),
    (('turns = [{', 'project = "nowhere"\nturns = [{'), 6, "sessions[0].project must be a declared project id"),
    (('class = "remember"', 'class = "forget"'), 10, "must be one of the world's classes"),
    (('classes = ["remember"]', 'classes = ["remember", "forget"]'), 3, "forget has no deterministic check"),
    (('{ user = "I use Neovim as my editor." }', '{ user = 7 }'), 6, "sessions[0].turns[0].user"),
])
def test_an_invalid_world_names_the_line_of_the_offending_key(tmp_path, change, line, words):
    err = _error(tmp_path, GOOD.replace(*change))
    assert err.code == "WORLD_INVALID"
    assert err.message.startswith(f"{tmp_path / 'world.toml'}:{line}: "), err.message
    assert words in err.message


def test_the_cli_reports_a_bad_world_file_as_one_line_and_runs_nothing(tmp_path):
    bad = _write(tmp_path, GOOD.replace('kind = "present"', 'kind = "presnt"'))
    proc = run_cm(["eval", "--synthetic", "careful", "--world-file", bad])
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert err.startswith(f"cm: WORLD_INVALID: {bad}:9: checks[0].kind must be one of") and "Traceback" not in err
    assert proc.stdout == b""
