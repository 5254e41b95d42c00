"""`cm synthetic-model serve`: a synthetic provider a user points the real setup at.

The server is the real command as a subprocess (127.0.0.1, bounded lifetime, stopped by its PID).
The setup wizard is driven against it (textual pilot, as the other UI tests), then the connection
test, an Adjust Memory request and a captured Codex session all go through it to committed memory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
from conftest import CM, hook_env, run_cm, settle
from synthetic_support import Served, start
from tui_support import drive, model_form, open_action, temp_hosts, wait_for

from cmrunner.core import config as config_mod
from cmrunner.synthetic import codexplay
from cmrunner.synthetic.fakemodel import stop_process
from cmrunner.tui.app import CmApp

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def served() -> Iterator[Served]:
    server = start()
    try:
        yield server
    finally:
        stop_process(server.process)


def test_it_says_what_it_is_and_how_to_point_cm_at_it(served):
    assert served.banner.startswith("SYNTHETIC MODEL: cm's own fake model, not a language model")
    assert "(127.0.0.1 only)" in served.banner and "nothing it is sent is recorded" in served.banner
    assert f"config init --base-url {served.base_url} --model synthetic --api-key-stdin" in served.banner
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=10) == 0
    assert served.process.stdout.read().decode().strip().endswith("synthetic model stopped")


def test_the_printed_commands_configure_a_home_whose_network_test_passes(served, tmp_path):
    home = str(tmp_path / "typed-home")
    init = next(line for line in served.banner.splitlines() if "config init" in line)
    proc = subprocess.run(["sh", "-c", init.replace("| cm ", f"| {CM} --home {home} ", 1)], capture_output=True,
                          env=hook_env(), timeout=30)
    assert proc.returncode == 0, proc.stderr
    test = run_cm(["--home", home, "network-test", "--json"])
    assert test.returncode == 0, test.stdout + test.stderr  # was HTTP 500: the policy needed a memory task
    assert json.loads(test.stdout)["outcome"]["ok"] is True


def test_a_port_in_use_is_a_coded_error(served):
    port = served.base_url.split(":")[2].split("/")[0]
    proc = run_cm(["synthetic-model", "serve", "--port", port, "--minutes", "1"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: PORT_UNAVAILABLE: ")


def test_the_setup_wizard_then_edit_and_observation_tasks_run_against_it(served, home, tmp_path):
    hosts = temp_hosts(str(tmp_path), pi=False)

    async def wizard(pilot):
        await model_form(pilot, served.base_url, key="not-a-secret")
        text = await wait_for(pilot, "1 model at")
        assert "synthetic" in text
        await pilot.press("enter")
        await wait_for(pilot, "Agent Integration")
        await pilot.press("enter")
        await wait_for(pilot, "Setup is complete", timeout=60)
        await pilot.press("enter")

    drive(CmApp(home, discover=hosts, user_home=str(tmp_path / "userhome")), wizard)
    remote = config_mod.load(home).remote
    assert remote["baseUrl"] == served.base_url and remote["model"] == "synthetic"

    async def connection(pilot):
        text = await wait_for(pilot, "Outcome:", timeout=30)
        assert "Outcome: OK in" in text, text
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=hosts), open_action("test", connection))

    async def adjust(pilot):
        text = await wait_for(pilot, "Notice:")
        assert f"synthetic at {served.base_url}" in text
        await pilot.press(*"I prefer tabs over spaces in Go code.", "enter")
        text = await wait_for(pilot, "Status: processed", timeout=90)
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=hosts), open_action("adjust", adjust))
    cfg = config_mod.load(home)
    with open(os.path.join(cfg.data_root, "memory", "preferences.md"), encoding="utf-8") as handle:
        assert "## Indentation\nPrefers tabs over spaces in Go code." in handle.read()

    work = tmp_path / "work"
    work.mkdir()
    session = codexplay.Session(str(tmp_path), "s1", home, str(work))
    assert session.start().code == 0
    prompt, stop = session.turn(1, "I live in Lisbon.", "Noted.")
    assert (prompt.code, stop.code, session.end().code) == (0, 0, 0)
    settle(home)
    with open(os.path.join(cfg.data_root, "memory", "profile.md"), encoding="utf-8") as handle:
        assert "## Location\nLives in Lisbon." in handle.read()
    jobs = run_cm(["status", "--json"])
    assert json.loads(jobs.stdout)["jobs"] == {"done": 2}
