"""`cm eval` discriminates: the careful policy scores 100%, each faulty policy fails exactly its class.

The whole suite runs once with the careful policy, through the real hooks, drains and Writer
(``--keep`` keeps each world's folder, the fake model's request log included). Each faulty policy
runs for real on the worlds of its own class and must fail that class and no other. That it fails
no other world either is shown without running the other 8 × 27 worlds: every decision the
careful policy made in the suite is recomputed from the very state the fake model was shown, and
each faulty policy must decide exactly the same wherever the world does not test its class; the
rest of the path is the same code, so the memory — and every check on it — comes out the same.
"""

from __future__ import annotations

import json
import os
from importlib import resources

import jsonschema
import pytest
from eval_support import eval_json

from cmrunner.evals import report as report_mod, world as world_mod
from cmrunner.synthetic import careful, fakepolicy, faulty

REPORT_SCHEMA = json.loads((resources.files("cmrunner.evals") / "report.schema.json").read_text(encoding="utf-8"))


def test_the_committed_report_schema_is_the_models_schema():
    assert report_mod.json_schema() == REPORT_SCHEMA, (
        "regenerate with: python -c \"import json; from cmrunner.evals import report; "
        "print(json.dumps(report.json_schema(), indent=2, sort_keys=True))\" > cmrunner/evals/report.schema.json")


@pytest.fixture(scope="module")
def careful_suite(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("careful"))
    kept = os.path.join(tmp, "kept")
    code, report, err = eval_json(tmp, "--synthetic", "careful", "--keep", kept)
    return {"code": code, "report": report, "stderr": err, "kept": kept, "tmp": tmp}


def test_the_careful_policy_scores_100_percent(careful_suite):
    report = careful_suite["report"]
    assert careful_suite["code"] == 0, careful_suite["stderr"]
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["model"]["synthetic"] is True and report["model"]["policy"] == "careful"
    assert report["score"] == {"worlds": len(world_mod.shipped()), "passed": len(world_mod.shipped()), "failed": 0,
                               "notRun": 0, "percent": 100.0}
    assert report["failedClasses"] == []
    assert {c["class"] for c in report["classes"]} == set(world_mod.CLASSES)
    assert all(c["status"] == "passed" and c["checks"] > 0 for c in report["classes"])
    assert "SYNTHETIC" in careful_suite["stderr"] and "nothing leaves this machine" in careful_suite["stderr"]


def test_every_world_ran_in_a_temporary_home_that_is_gone(careful_suite):
    assert os.listdir(os.path.join(careful_suite["tmp"], "tmp")) == []
    assert sorted(os.listdir(careful_suite["kept"])) == sorted(w.id for w in world_mod.shipped())
    for world in os.listdir(careful_suite["kept"]):
        assert not os.path.exists(os.path.join(careful_suite["kept"], world, "home", ".env"))
    assert not os.path.exists(os.path.join(careful_suite["tmp"], "home")), "the user's home is never created"


def test_each_worlds_cost_is_what_its_ledger_recorded(careful_suite):
    report = careful_suite["report"]
    for world in report["worlds"]:
        log = os.path.join(careful_suite["kept"], world["id"], "model", "fakemodel.requests.jsonl")
        with open(log, encoding="utf-8") as handle:
            served = [json.loads(line) for line in handle]
        assert world["cost"]["requests"] == len([r for r in served if r["reply"] is not None]) >= 2, world["id"]
        assert world["cost"]["bytesSent"] == sum(r["bytes"] for r in served if r["reply"] is not None)
    total = report["cost"]
    assert total["userTurns"] == sum(w.user_turns for w in world_mod.shipped())
    assert total["total"]["requests"] == sum(w["cost"]["requests"] for w in report["worlds"])
    assert total["perUserTurn"]["requests"] == round(total["total"]["requests"] / total["userTurns"], 2)


def _decisions(kept: str) -> list[tuple[world_mod.World, dict]]:
    """(world, policy state) of every decision the careful policy submitted in the suite."""
    found = []
    for world in world_mod.shipped():
        log = os.path.join(kept, world.id, "model", "fakemodel.requests.jsonl")
        with open(log, encoding="utf-8") as handle:
            for line in handle:
                request = json.loads(line)
                if request["cue"] == fakepolicy.SUBMIT:
                    found.append((world, fakepolicy.policy_state(fakepolicy.view(request["path"], request["body"]))))
    return found


def test_faulty_policies_decide_as_the_careful_one_outside_their_class(careful_suite):
    decisions = _decisions(careful_suite["kept"])
    assert len(decisions) >= sum(len(w.sessions) for w in world_mod.shipped())
    differing = {name: 0 for name in faulty.CLASSES}
    for world, state in decisions:
        expected = careful.careful(state)
        for name, policy in faulty.FAULTY.items():
            violation = name.removeprefix("faulty_")
            if violation in world.classes:
                differing[violation] += policy(state) != expected
            else:
                assert policy(state) == expected, f"{name} differs from careful in {world.id}"
    # ...and each of them does decide differently somewhere in its own class's worlds
    assert all(differing.values()), differing


@pytest.mark.parametrize("violation", list(faulty.CLASSES))
def test_each_faulty_policy_fails_exactly_its_class(tmp_path, violation):
    code, report, err = eval_json(str(tmp_path), "--synthetic", f"faulty_{violation}", "--class", violation)
    assert code == 1, err
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["failedClasses"] == [violation]
    tested = [w for w in world_mod.shipped() if violation in w.classes]
    assert [w["id"] for w in report["worlds"]] == [w.id for w in tested]
    failed = [(w["id"], c) for w in report["worlds"] for c in w["checks"] if not c["passed"]]
    assert failed and all(c["class"] == violation and c["quote"] for _, c in failed)
    assert report["score"]["notRun"] == 0 and report["score"]["passed"] < report["score"]["worlds"]
    assert os.listdir(tmp_path / "tmp") == []
