"""The newcomer's path, end to end in a temporary home, as the README's "Try it without a provider" gives it.

It runs the README's own commands (with the folder they name replaced by a temporary one), then
every command the demo printed for its kept home, then brings the synthetic model back with the
command the demo printed and plays one more Codex session, which is written to memory. No
recording, no network: the real console script, the real hooks, drains and the synthetic model.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess

import pytest
from conftest import CM, hook_env, run_cm, settle
from synthetic_support import start

from cmrunner.synthetic import codexplay
from cmrunner.synthetic.fakemodel import stop_process

pytestmark = pytest.mark.timeout(300)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_FOLDER = "/tmp/cm-try"


def readme_commands() -> list[str]:
    """The commands of the README's "Try it without a provider" block, comments dropped."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("### Try it without a provider", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _run(command: str, folder: str) -> subprocess.CompletedProcess[bytes]:
    args = shlex.split(command.replace(README_FOLDER, folder))
    assert args[0] == "cm", command
    return subprocess.run([CM, *args[1:]], capture_output=True, env=hook_env(), timeout=180)


def test_the_readme_names_three_commands_at_most():
    commands = readme_commands()
    assert 1 <= len(commands) <= 3 and all(c.startswith("cm ") for c in commands)


def test_a_newcomer_tries_cm_without_a_provider(home, tmp_path):
    folder = str(tmp_path / "cm-try")
    demo, show, serve = readme_commands()
    proc = _run(demo, folder)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode() + out[-2000:]
    assert f"kept:        {folder} (a working home" in out
    assert not os.path.exists(home), "the user's own home is never touched"

    shown = _run(show, folder)
    assert shown.returncode == 0 and "Now prefers spaces over tabs in Go code." in shown.stdout.decode()

    # every command the demo printed for its home works, and says what it promised
    printed = re.findall(r"^(?:next:|\s)\s+(cm .+?)\s+# ", out, re.M)
    assert len(printed) == 6, out[-1500:]
    expected = {"show": "Uses SQLite for storage.", "history": "remove by memory_agent (forget)",
                "trash": "profile / Location", "codex-config": "hook codex --home " + folder,
                "mcp-config": f'COMMON_MEMORY_HOME = "{folder}"'}
    for command in printed[:-1]:
        name = shlex.split(command)[3]
        result = _run(command, folder)
        assert result.returncode == 0, (command, result.stderr)
        assert expected[name] in result.stdout.decode(), (command, result.stdout[-500:])

    # the last printed command brings back the synthetic model the home is configured with
    assert printed[-1].startswith("cm synthetic-model serve --port ")
    served = start(*shlex.split(printed[-1])[3:])
    try:
        status = run_cm(["--home", folder, "network-test"])
        assert status.returncode == 0, status.stdout + status.stderr
        work = re.search(r"show --workspace (\S+)", out).group(1)
        session = codexplay.Session(str(tmp_path), "later", folder, work)
        assert session.start().code == 0
        prompt, stop = session.turn(1, "I use Neovim as my editor.", "Noted.")
        assert (prompt.code, stop.code, session.end().code) == (0, 0, 0)
        settle(folder)
        prefs = open(os.path.join(folder, "data", "memory", "preferences.md"), encoding="utf-8").read()
        assert "## Editor" in prefs and "Neovim" in prefs
        assert run_cm(["--home", folder, "status"]).returncode == 0
    finally:
        served.process.send_signal(signal.SIGTERM)
        stop_process(served.process)

    # the README's third command is the provider a newcomer points the setup wizard at
    assert serve.startswith("cm synthetic-model serve")
