"""The real `cm` in a real pseudo-terminal (tmux): first run, Home, Ctrl+C, and the terminal restored.

Each session runs a small shell script that saves `stty -a` before and after `cm` and prints cm's
exit status, so the test can see that the terminal modes came back and the alternate screen was
left (the shell's own output is visible again).
"""

from __future__ import annotations

import json
import os
import shlex

import pytest
from conftest import BIN, CM
from tui_support import KEY, Tmux

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(120)


def session(tmp_path, home: str, name: str, size: tuple[int, int] = (110, 36)) -> Tmux:
    script = tmp_path / f"{name}.sh"
    before, after = tmp_path / f"{name}.before", tmp_path / f"{name}.after"
    script.write_text(f"stty -a > {shlex.quote(str(before))}\n{shlex.quote(CM)}\n"
                      f"status=$?\nstty -a > {shlex.quote(str(after))}\necho \"CM-EXIT:$status\"\nsleep 60\n")
    env = {"COMMON_MEMORY_HOME": home, "CODEX_HOME": str(tmp_path / "codexhome"),
           "PI_CODING_AGENT_DIR": str(tmp_path / "no-pi"), "PATH": f"{BIN}:/usr/bin:/bin",
           "CM_TEST_DRAIN_LINGER_MS": "0", "HOME": str(tmp_path / "userhome")}  # never the real ~/.claude
    os.makedirs(env["CODEX_HOME"], exist_ok=True)
    return Tmux(f"cm-{name}-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}", f"sh {shlex.quote(str(script))}", env,
                *size)


def restored(tmp_path, name: str) -> bool:
    return (tmp_path / f"{name}.before").read_text() == (tmp_path / f"{name}.after").read_text()


def test_first_run_then_home_in_a_real_terminal_restore_the_terminal(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        pane = session(tmp_path, home, "first", (140, 45))
        try:
            pane.wait("1/4 Provider")
            pane.keys("Enter")
            pane.wait("2/4 Base URL")
            pane.keys("C-u")
            pane.text(fake.base_url)
            pane.keys("Enter")
            pane.wait("3/4 API key")
            pane.text(KEY)
            pane.keys("Enter")
            screen = pane.wait("fake-model")
            assert KEY not in screen
            pane.keys("Enter")
            pane.wait("[x] Codex CLI")
            pane.keys("Enter")
            screen = pane.wait("Installation check:", timeout=30)
            assert "Run `cm` again" not in screen and "then cm's home screen" in screen
            pane.keys("Enter")  # the last setup screen leads on to Home, as it says
            pane.wait("Model & Configuration")
            pane.text("?")
            pane.wait("? this help")
            pane.text("q")
            pane.wait("CM-EXIT:0")
        finally:
            pane.close()
    assert restored(tmp_path, "first")
    assert json.load(open(os.path.join(home, "config.json")))["remote"]["model"] == "fake-model"

    pane = session(tmp_path, home, "home")
    try:
        pane.wait("Model & Configuration")
        pane.wait("agents: Codex CLI")  # the status line is filled in just after the columns
        pane.keys("Escape")
        pane.wait("CM-EXIT:0")
    finally:
        pane.close()
    assert restored(tmp_path, "home")


def test_ctrl_c_mid_setup_restores_the_terminal_and_writes_nothing(home, tmp_path):
    pane = session(tmp_path, home, "interrupt")
    try:
        pane.wait("1/4 Provider")
        pane.keys("Enter")
        pane.wait("2/4 Base URL")
        pane.keys("C-c")
        screen = pane.wait("CM-EXIT:")
        assert "CM-EXIT:0" in screen and "Base URL" not in screen
    finally:
        pane.close()
    assert restored(tmp_path, "interrupt")
    assert not os.path.exists(home)
