"""`cm eval` as a user runs it: the model it tests, asking before spending, provider failures,
the judge, the Markdown report and the option errors."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from conftest import on_terminal
from eval_support import cm_eval as run_eval, eval_env

from cmrunner.core import config as config_mod, envfile
from cmrunner.evals import world as evals_world
from cmrunner.synthetic import fakemodel

KEY = "sk-eval-test-key-0123456789"
REMEMBER_PREFERENCES = os.path.join(os.path.dirname(evals_world.__file__), "worlds", "01-remember-preferences.toml")
POLICY = '''from cmrunner.synthetic.careful import careful


def unauthorized_on_pineapple(state):
    """The careful policy, except that the provider refuses any job that mentions pineapple."""
    if any("pineapple" in source["text"] for source in state["sources"]):
        return {"reply": {"error": {"status": 401}}}
    return careful(state)
'''
PINEAPPLE = '''id = "pineapple"
title = "the provider refuses this world"
classes = ["remember"]

[[sessions]]
turns = [{ user = "I like pineapple on pizza." }]

[[checks]]
kind = "present"
class = "remember"
where = "preferences"
pattern = "pineapple"
'''


def cm_eval(tmp_path, *args: str):
    return run_eval(str(tmp_path), *args)


def configure(tmp_path, base_url: str) -> str:
    """The user's own home: a configured model and its key in the private .env."""
    home = str(tmp_path / "home")
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "their-model",
                      "apiKeyEnv": "THEIR_KEY", "apiKeySource": "private-env", "api": "responses",
                      "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    envfile.update(home, {"THEIR_KEY": KEY, "JUDGE_KEY": "judge-key-0123456789"})
    return home


def test_a_provider_failure_leaves_that_world_not_run_and_the_others_run(tmp_path):
    (tmp_path / "policy.py").write_text(POLICY, encoding="utf-8")
    (tmp_path / "pineapple.toml").write_text(PINEAPPLE, encoding="utf-8")
    proc = cm_eval(tmp_path, "--synthetic", f"{tmp_path / 'policy.py'}:unauthorized_on_pineapple",
                   "--world", "forget-shell", "--world-file", str(tmp_path / "pineapple.toml"),
                   "--world", "remember-profile")
    out = proc.stdout.decode()
    assert proc.returncode == 1, proc.stderr
    assert "| pineapple | remember | not run (AUTHENTICATION) | 1 | 2 |" in out  # one read, then the refusal
    assert "| forget-shell | forget | passed | 3 | 4 |" in out and "| remember-profile | remember | passed | 2 | 2 |" in out
    assert "## Not run" in out and "- **pineapple**: AUTHENTICATION:" in out
    assert "Score: **100%** — 2 of 2 worlds passed, 1 not run" in out
    assert os.listdir(tmp_path / "tmp") == [], "every temporary home is removed"


def test_a_real_model_is_only_used_after_the_user_agrees(tmp_path):
    with fakemodel.running(str(tmp_path / "model"), {"policy": "careful"}) as model:
        home = configure(tmp_path, model.base_url)
        proc = cm_eval(tmp_path, "--world", "remember-preferences")
        assert proc.returncode == 1
        err = proc.stderr.decode()
        assert "never your memory" in err and f"their-model at {model.base_url}" in err
        assert err.strip().splitlines()[-1].startswith("cm: CONFIRMATION_REQUIRED: ")
        assert model.requests() == [], "nothing was sent before the user agreed"

        proc = cm_eval(tmp_path, "--world", "remember-preferences", "--world", "correct-editor", "--yes", "--json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["model"] == {"label": f"their-model at {model.base_url}", "synthetic": False, "policy": None,
                                   "model": "their-model", "baseUrl": model.base_url, "api": "responses"}
        assert report["score"]["percent"] == 100.0
        sent = model.model_requests()
        assert sent and {r["auth_sha256"] for r in sent} == {hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()}
    assert KEY.encode() not in proc.stdout + proc.stderr
    assert not os.path.exists(os.path.join(home, "data")), "the user's own memory is never touched"
    assert os.listdir(tmp_path / "tmp") == []


def test_a_candidate_model_is_named_on_the_command_line(tmp_path):
    with fakemodel.running(str(tmp_path / "model"), {"policy": "careful"}) as model:
        home = str(tmp_path / "home")
        envfile.update(home, {"CANDIDATE_KEY": KEY})
        proc = cm_eval(tmp_path, "--model", "candidate-1", "--base-url", model.base_url, "--api", "chat_completions",
                       "--api-key-env", "CANDIDATE_KEY", "--world", "remember-profile", "--yes", "--json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["model"]["model"] == "candidate-1" and report["model"]["api"] == "chat_completions"
        assert {r["path"] for r in model.model_requests()} == {"/v1/chat/completions"}


def test_the_judge_is_reported_apart_and_never_scored(tmp_path):
    script = {"default": {"text": "FAIL: the headings are vague"}}
    with fakemodel.running(str(tmp_path / "judge"), script) as judge:
        configure(tmp_path, judge.base_url)
        args = ["--synthetic", "careful", "--world", "remember-preferences", "--judge-model", "judge-1",
                "--judge-base-url", judge.base_url, "--judge-api-key-env", "JUDGE_KEY", "--json"]
        refused = cm_eval(tmp_path, *args)
        assert refused.stderr.decode().strip().splitlines()[-1].startswith("cm: CONFIRMATION_REQUIRED: ")
        assert judge.requests() == [], "a judge is a paid provider too: nothing is sent before the user agrees"
        proc = cm_eval(tmp_path, *args, "--yes")
        asked = judge.model_requests()
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["judge"] == f"judge-1 at {judge.base_url}"
    (world,) = report["worlds"]
    [question] = [c.question for c in evals_world.load(REMEMBER_PREFERENCES).checks if c.kind == "judge"]
    assert world["judge"] == [{"class": "remember", "question": question, "verdict": "FAIL",
                               "reason": "the headings are vague"}]
    assert world["status"] == "passed" and report["score"]["percent"] == 100.0
    assert len(asked) == 1 and "## Indentation" in json.dumps(asked[0]["body"])
    assert "judge: judge-1" in proc.stderr.decode()


def test_the_markdown_report_names_the_failed_class_and_quotes_the_section(tmp_path):
    proc = cm_eval(tmp_path, "--synthetic", "faulty_third_party_as_user", "--world", "third-party-colleague")
    out = proc.stdout.decode()
    assert proc.returncode == 1
    assert "Failed classes: third_party_as_user." in out
    assert "| third_party_as_user | violation | 1 | 0/1 | failed |" in out
    assert "Cost: 2 requests," in out and "over 2 user turns; per user turn 1 requests," in out
    assert "> preferences › Editor: Prefers Emacs for everything." in out
    assert "[#" not in proc.stderr.decode(), "no progress bar when stderr is not a terminal"


def test_the_progress_bar_is_drawn_on_a_terminal_and_stdout_stays_json(tmp_path):
    proc, drawn = on_terminal(["eval", "--synthetic", "careful", "--world", "remember-profile", "--json"],
                              eval_env(str(tmp_path)), stream="stderr", timeout=300)
    assert proc.returncode == 0
    assert f"[{'#' * 30}] 1/1 remember-profile" in drawn
    assert json.loads(proc.stdout)["score"]["passed"] == 1


def test_list_names_the_shipped_worlds(tmp_path):
    proc = cm_eval(tmp_path, "--list", "--class", "forget")
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert lines and all("forget" in line for line in lines)
    assert any(line.startswith("forget-shell ") for line in lines)


@pytest.mark.parametrize(("args", "code"), [
    (["--synthetic", "careful", "--model", "x"], "EVAL_OPTIONS_CONFLICT"),
    (["--synthetic", "no_such_policy"], "UNKNOWN_POLICY"),
    (["--world", "remember-profile"], "UNCONFIGURED"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "ABSENT"], "API_KEY_MISSING"),
    (["--synthetic", "careful", "--world", "no-such-world"], "UNKNOWN_WORLD"),
    (["--synthetic", "careful", "--class", "no_such_class"], "UNKNOWN_CLASS"),
    (["--synthetic", "careful", "--world-file", "/nonexistent/world.toml"], "WORLD_NOT_FOUND"),
    (["--synthetic", "careful", "--keep", "/proc/no-such-folder/kept"], "KEEP_UNWRITABLE"),
    (["--synthetic", "careful", "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1",
      "--judge-api-key-env", "ABSENT"], "API_KEY_MISSING"),
])
def test_bad_options_get_a_code_and_run_nothing(tmp_path, args, code):
    proc = cm_eval(tmp_path, *args)
    assert proc.returncode == 1
    assert proc.stderr.decode().strip().splitlines()[-1].startswith(f"cm: {code}: "), proc.stderr
    assert proc.stdout == b""
    assert os.listdir(tmp_path / "tmp") == []
