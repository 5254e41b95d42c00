"""The pinned hook form `<python> -I -S <installed cmrunner>/__main__.py …` (issue 35) and the upgrade
from an older cm's `<python> -I -m cmrunner …` entries.

The script form must run the installation its path names whatever the interpreter's own paths hold,
fall back to the site directories for a rare third-party import, and replace an older cm's entries
as cm's own on the next install, leave a user's entries alone, and remove either form.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import Transcript, event, hook_env, run_cm
from tui_support import configure_model, temp_hosts

import cmrunner
from cmrunner.manage import hostconfig
from cmrunner.manage.integrations import checks, manager, manifest as manifest_mod, txn

pytestmark = pytest.mark.timeout(180)
PACKAGE = os.path.dirname(os.path.abspath(cmrunner.__file__))  # the installed copy
ENTRY = os.path.join(PACKAGE, "__main__.py")
PYTHON = os.path.abspath(sys.executable)
NEW = shlex.join(["-I", "-S", ENTRY])
OLD = "-I -m cmrunner"
# The Pi wrapper holds the argv as a JSON string inside JavaScript (json.dumps twice).
NEW_PI = json.dumps(json.dumps(["-I", "-S", ENTRY]))[3:-3]
OLD_PI = json.dumps(json.dumps(["-I", "-m", "cmrunner"]))[3:-3]


def _modules(stderr: bytes) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.decode().splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_script_form_runs_the_installation_its_path_names_where_m_cannot(home, tmp_path, workdir):
    """A copy of the package outside every path the interpreter knows (as `pip install --user` is under
    -I), started by the base interpreter (no venv): the script form finds it; `-m cmrunner` does not.
    A `cmrunner` and a `sqlite3` in the project directory are never imported."""
    elsewhere = tmp_path / "elsewhere" / "lib"
    shutil.copytree(PACKAGE, elsewhere / "cmrunner", ignore=shutil.ignore_patterns("__pycache__"))
    base = os.path.realpath(os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}."
                                                                   f"{sys.version_info.minor}"))
    (tmp_path / "proj" / "cmrunner").mkdir(parents=True)
    (tmp_path / "proj" / "cmrunner" / "__init__.py").write_text("raise SystemExit('project cmrunner imported')\n")
    (tmp_path / "proj" / "sqlite3.py").write_text("raise SystemExit('project sqlite3 imported')\n")
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    start = json.dumps(event("SessionStart", transcript, workdir, source="startup")).encode()
    env = hook_env(PYTHONPATH=str(tmp_path / "proj"))
    script = [base, "-I", "-S", str(elsewhere / "cmrunner" / "__main__.py"), "hook", "codex", "--home", home]
    proc = subprocess.run(script, input=start, capture_output=True, env=env, cwd=tmp_path / "proj", timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    module = [base, "-I", "-m", "cmrunner", "hook", "codex", "--home", home]
    proc = subprocess.run(module, input=start, capture_output=True, env=env, cwd=tmp_path / "proj", timeout=60)
    assert proc.returncode != 0 and b"No module named cmrunner" in proc.stderr
    # The script's own folder is not on sys.path under -I (-P): a module next to __main__.py is not found.
    probe = subprocess.run([base, "-I", "-S", "-c", "import sys; print(sys.flags.safe_path)"], capture_output=True)
    assert probe.stdout.strip() == b"True"


def test_a_third_party_import_on_a_rare_hook_path_loads_site_once(home, tmp_path, workdir):
    """A hand-edited config.json is validated with pydantic (site-packages) by the next hook, in the
    pinned form too; the turns around it load no `site`."""
    assert run_cm(["config", "init"]).returncode == 0
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    start = event("SessionStart", transcript, workdir, source="startup")
    pinned = [PYTHON, "-X", "importtime", "-I", "-S", ENTRY, "hook", "codex", "--home", home]
    assert subprocess.run(pinned, input=json.dumps(start).encode(), env=hook_env(), capture_output=True,
                          timeout=60).returncode == 0

    def prompt(n: int) -> set[str]:
        transcript.user_turn(f"t{n}", f"hello {n}")
        payload = event("UserPromptSubmit", transcript, workdir, turn_id=f"t{n}", prompt=f"hello {n}")
        proc = subprocess.run(pinned, input=json.dumps(payload).encode(), env=hook_env(), capture_output=True,
                              timeout=60)
        assert proc.returncode == 0 and proc.stdout == b"{}\n", proc.stderr.decode()[-2000:]
        return _modules(proc.stderr)

    assert "site" not in prompt(1)
    path = os.path.join(home, "config.json")
    with open(path) as handle:
        data = json.load(handle)
    data["disclosure"]["allowedProvenance"].append("agent_observation")
    with open(path, "w") as handle:
        json.dump(data, handle, indent=4)
    edited = prompt(2)
    assert {"site", "pydantic", "cmrunner.core.configmodel"} <= edited
    assert "site" not in prompt(3)


# -- an older cm's entries ------------------------------------------------------------------------

def _to_legacy(home: str, paths: list[str]) -> None:
    """Rewrite what cm installed as an older cm (before issue 35) wrote it: host files and manifest."""
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(NEW, OLD).replace(NEW_PI, OLD_PI))
    recorded = manifest_mod.load(home)
    for path, info in recorded["files"].items():
        info["sha256"] = txn.digest(txn.read_bytes(path))
    text = json.dumps(recorded).replace(NEW, OLD)
    with open(manifest_mod.path_of(home), "wb") as handle:
        handle.write(manifest_mod.render(json.loads(text)))


def _user_files(tmp_path, home: str) -> dict[str, bytes]:
    """Every file outside cm's home (the hosts' folders)."""
    return {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not str(p).startswith(home + os.sep)}


def _installed_texts(paths: list[str]) -> str:
    return "".join(open(p, encoding="utf-8").read() for p in paths)


HOSTS = ["codex", "claude-code", "gemini", "pi"]


def _setup(home: str, tmp_path) -> tuple[object, list[str], dict[str, bytes]]:
    configure_model(home, "http://127.0.0.1:9/v1")
    discover = temp_hosts(str(tmp_path), claude=True, gemini=True)
    user = tmp_path / "userhome"
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"{PYTHON} {OLD} hook claude --home "
                                                                               f"{home}"}]}]}}
    (user / ".claude" / "settings.json").write_text(json.dumps(theirs, indent=2) + "\n")
    (user / ".gemini" / "settings.json").write_text('{\n  // mine\n  "ui": {"theme": "GitHub"}\n}\n')
    before = _user_files(tmp_path, home)
    manager.apply(home, manager.plan(home, HOSTS, hosts=discover()))
    recorded = manifest_mod.load(home)
    paths = sorted(set(recorded["files"]) | {e["file"] for e in recorded["entries"]})
    assert NEW in _installed_texts(paths) and NEW_PI in _installed_texts(paths)
    return discover, paths, before


def test_an_older_cms_entries_are_recognized_refreshed_and_a_users_own_left_alone(home, tmp_path):
    discover, paths, _before = _setup(home, tmp_path)
    _to_legacy(home, paths)
    texts = _installed_texts(paths)
    assert NEW not in texts and NEW_PI not in texts and OLD_PI in texts
    report = checks.run(home, start_servers=False)
    states = {c.name: (c.state, c.detail) for c in report.checks}
    for title, refresh in (("Claude Code", "claude-code"), ("Gemini CLI", "gemini")):
        assert states[f"{title} settings"][0] == "ok"  # still cm's own, exactly as written
        state, detail = states[f"{title} hook form"]
        assert state == "warn" and "older cm" in detail and f"cm agents install {refresh}" in detail
    assert not report.failed

    plan = manager.plan(home, HOSTS, hosts=discover())  # what `cm agents install <any>` plans
    manager.apply(home, plan)
    texts = _installed_texts(paths)
    assert OLD_PI not in texts and NEW_PI in texts
    assert texts.count(f"{PYTHON} {OLD} hook") == 1  # only the user's own Stop hook keeps the old form
    settings = json.loads((tmp_path / "userhome" / ".claude" / "settings.json").read_text())
    stop = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert stop == [f"{PYTHON} {OLD} hook claude --home {home}",
                    hostconfig.shell_command(hostconfig.Pins.current(home).hook_argv("hook", "claude", "--home", home))]
    assert OLD not in json.dumps(manifest_mod.load(home))
    states = {c.name: c.state for c in checks.run(home, start_servers=False).checks}
    assert not any(name.endswith("hook form") for name in states) and "fail" not in states.values()
    assert manager.plan(home, HOSTS, hosts=discover()).empty  # refreshed: nothing more to do


def test_removing_an_older_cms_entries_gives_back_the_users_files(home, tmp_path):
    discover, paths, before = _setup(home, tmp_path)
    _to_legacy(home, paths)
    manager.apply(home, manager.plan(home, [], hosts=discover()))  # `cm agents remove` of each
    assert _user_files(tmp_path, home) == before
    assert not os.path.exists(manifest_mod.path_of(home))


def test_doctor_names_an_older_codex_profile_and_how_to_refresh_it(home, tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    profile = run_cm(["codex-config"], env=hook_env(CODEX_HOME=str(codex_home))).stdout.decode()
    assert NEW in profile
    (codex_home / "common-memory.config.toml").write_text(profile.replace(NEW, OLD))
    proc = run_cm(["doctor"], env=hook_env(CODEX_HOME=str(codex_home)))
    lines = [line for line in proc.stdout.decode().splitlines() if "hook form" in line]
    assert len(lines) == 1 and lines[0].startswith("warn") and "cm codex-config" in lines[0], proc.stdout
    (codex_home / "common-memory.config.toml").write_text(profile)
    proc = run_cm(["doctor"], env=hook_env(CODEX_HOME=str(codex_home)))
    assert b"hook form" not in proc.stdout
