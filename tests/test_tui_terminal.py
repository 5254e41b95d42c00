"""The real `cm` in a real pseudo-terminal (tmux): the first run walked at 80×24 to Home, Ctrl+C,
and the terminal restored.

tmux comes with the machines this project runs on (developers' and CI's alike: Debian's tmux is in
their base image); ``tui_support.Tmux`` says how to install it if a machine lacks it.

Each session runs a small shell script that saves `stty -a` before and after `cm` and prints cm's
exit status, so the test can see that the terminal modes came back and the alternate screen was
left (the shell's own output is visible again).
"""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest
from conftest import BIN, CM
from tui_support import KEY, Tmux

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(120)


def session(tmp_path, home: str, name: str, size: tuple[int, int] = (110, 36)) -> Tmux:
    script = tmp_path / f"{name}.sh"
    before, after = tmp_path / f"{name}.before", tmp_path / f"{name}.after"
    # cm runs in the test's own folder, no project: Home offers to register a project folder it runs in
    script.write_text(f"cd {shlex.quote(str(tmp_path))}\nstty -a > {shlex.quote(str(before))}\n{shlex.quote(CM)}\n"
                      f"status=$?\nstty -a > {shlex.quote(str(after))}\necho \"CM-EXIT:$status\"\nsleep 60\n")
    env = {"COMMON_MEMORY_HOME": home, "CODEX_HOME": str(tmp_path / "codexhome"),
           "PI_CODING_AGENT_DIR": str(tmp_path / "no-pi"), "PATH": f"{BIN}:/usr/bin:/bin",
           "CM_TEST_DRAIN_LINGER_MS": "0", "HOME": str(tmp_path / "userhome")}  # never the real ~/.claude
    os.makedirs(env["CODEX_HOME"], exist_ok=True)
    return Tmux(f"cm-{name}-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}", f"sh {shlex.quote(str(script))}", env,
                *size)


def restored(tmp_path, name: str) -> bool:
    return (tmp_path / f"{name}.before").read_text() == (tmp_path / f"{name}.after").read_text()


def flat_wait(pane: Tmux, *needles: str, timeout: float = 20.0) -> str:
    """Wait until every one of ``needles`` shows, with the pane's line wraps (and runs of spaces) made
    one space (at 80 columns most sentences wrap; a screen is drawn in several writes, so each
    screen's texts are awaited together); returns that flat text."""
    deadline = time.monotonic() + timeout
    while True:
        screen = " ".join(pane.capture().split())
        missing = [n for n in needles if " ".join(n.split()) not in screen]
        if not missing:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {missing!r} in tmux; the pane shows:\n{pane.capture()}")
        time.sleep(0.05)


def test_first_run_walk_at_80x24_to_home_in_a_real_terminal(home, tmp_path):
    """The first run as a person at an 80×24 terminal sees it: each step's text and footer, Esc on the
    first step asking, the import plan with its total and permission in view, then Home; the
    terminal is restored after q."""
    memories = tmp_path / "codexhome" / "memories"
    memories.mkdir(parents=True)
    (memories / "MEMORY.md").write_text("# Memory\n\n- Prefers small pull requests.\n")
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        pane = session(tmp_path, home, "first", (80, 24))
        try:
            flat_wait(pane, "Model setup · 1/4 Provider", "Which provider runs your Memory Agent?",
                      "OpenAI (Responses)", "↑↓ move · Enter choose · Esc back · q quit · ? help")
            pane.keys("Escape")  # the first step asks before quitting, saying nothing was saved
            flat_wait(pane, "Quit cm? Nothing of this form is saved: the model configuration stays as it was. "
                            "Press Esc again to quit; any other key stays here.")
            pane.keys("Enter")  # another key withdraws the question and chooses OpenAI
            flat_wait(pane, "Model setup · 2/4 Base URL", "https://api.openai.com/v1",
                      "Enter continue · Esc back · q quit · ? help")
            pane.keys("C-u")
            flat_wait(pane, "https://host/v1")  # the emptied field's placeholder: text sent in the same
            pane.text(fake.base_url)            # burst as Ctrl+U is sometimes dropped (2 runs in 8)
            flat_wait(pane, fake.base_url)
            pane.keys("Enter")
            flat_wait(pane, "Model setup · 3/4 API key", "Paste the API key.")
            pane.text(KEY)
            pane.keys("Enter")
            screen = flat_wait(pane, "Model setup · 4/4 Model", "1 model at " + fake.base_url, "fake-model",
                               "↑↓ move · Enter choose · Esc back · q quit · ? help")
            assert KEY not in screen
            pane.keys("Enter")
            flat_wait(pane, "[x] Codex CLI", "Choose the agents cm should connect to.",
                      "Space toggle · Enter apply · PgDn details · Esc cancel · q quit · ? help")
            pane.keys("Enter")
            flat_wait(pane, "Installation check:", "Installed: Codex CLI",
                      "Setup is complete. Enter: bring in what your agents",
                      "Enter next: bring in what your agents know, then Home · Esc quit · q quit · ? help",
                      timeout=60)
            pane.keys("Enter")
            flat_wait(pane, "Bring in what your agents already know", "Codex CLI (chosen)",
                      "codex:MEMORY [personal] → global: new, 1 part", "To import: 1 file, ~",
                      "Permission: document imports are off", "Skip leaves it off.",
                      "Import 1 file and allow document imports", "Skip: import nothing",
                      "↑↓ move · PgUp/PgDn scroll · Enter choose · Esc skip · q quit · ? help", timeout=60)
            pane.keys("Down", "Enter")  # Skip
            flat_wait(pane, "cm · Common Memory", "Agent Integration", "Memory Control", "Model & Configuration",
                      "agents: Codex CLI",  # the status line is filled in just after the columns
                      "↑↓ move · ←→ column · Enter open · Esc quit · q quit · ? help")
            pane.text("?")
            flat_wait(pane, "? this help")
            pane.text("q")  # Home is the top: q quits at once
            pane.wait("CM-EXIT:0")
        finally:
            pane.close()
    assert restored(tmp_path, "first")
    assert json.load(open(os.path.join(home, "config.json")))["remote"]["model"] == "fake-model"
    assert "document_import" not in json.dumps(json.load(open(os.path.join(home, "config.json"))))  # Skip granted nothing

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
