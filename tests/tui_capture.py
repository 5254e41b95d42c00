"""Regenerate the text captures in docs/screens/: ``python tests/tui_capture.py docs/screens``.

Drives the real management UI with textual's pilot through every screen at 80×24, in a scratch home under
``/tmp/cm-screens`` (deleted and recreated), with the loopback fake model, a Codex folder (with its
memory files, for the import step), a Pi agent folder and a pretend ChatGPT.app. The management screens run
in a scratch git repository with a remote (``/tmp/cm-screens/src/ferrous``), so Home shows its offer to
register that folder; the first run runs in a folder outside git.
Each screen is written as plain text (what a person sees, without colour). Not a test: pytest does not collect it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tui_support import EDIT_POLICY, KEY, screen_text, temp_hosts, wait_for
from writer_support import admit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
from secrets_corpus import SECRETS

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp

ROOT = "/tmp/cm-screens"
SIZE = (80, 24)  # the smallest terminal the UI is made for (issue 36): what fits here fits anywhere


class Shots:
    def __init__(self, out: str) -> None:
        self.out = out
        self.count = 0

    async def save(self, pilot: object, name: str) -> None:
        pilot.app.screen.refresh(layout=True)  # type: ignore[attr-defined]  # a widget hidden since the
        await pilot.pause(0.3)  # type: ignore[attr-defined]  # last full paint must not linger in it
        self.count += 1
        path = os.path.join(self.out, f"{self.count:02d}-{name}.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(screen_text(pilot.app))  # type: ignore[attr-defined]


async def first_run(pilot: object, shots: Shots, base_url: str) -> None:
    await wait_for(pilot, "1/4 Provider")
    await shots.save(pilot, "setup-provider")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "2/4 Base URL")
    pilot.app.screen.query_one("#url").value = base_url  # type: ignore[attr-defined]
    await shots.save(pilot, "setup-base-url")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "3/4 API key")
    await pilot.press(*KEY)  # type: ignore[attr-defined]
    await shots.save(pilot, "setup-api-key")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "fake-model")
    await shots.save(pilot, "setup-model")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Agent Integration")
    await pilot.press("end", "space")  # type: ignore[attr-defined]  # ChatGPT later, from Home
    await shots.save(pilot, "setup-agents")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Installation check:", timeout=60)
    await shots.save(pilot, "setup-result")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "To import:", timeout=60)
    await shots.save(pilot, "setup-import")
    await pilot.press("down", "enter")  # type: ignore[attr-defined]  # Skip (the import itself: tests/test_tui_import.py)


def open_action(column: int, index: int):
    async def go(pilot: object) -> None:
        await wait_for(pilot, "cm · Common Memory")
        menu = pilot.app.screen.query_one(f"#column-{column}")  # type: ignore[attr-defined]
        menu.focus()
        menu.highlighted = index
        await pilot.press("enter")  # type: ignore[attr-defined]
    return go


async def management(pilot: object, shots: Shots, home: str) -> None:
    await wait_for(pilot, "Register this folder (ferrous)")
    await shots.save(pilot, "home")
    await pilot.press("r")  # type: ignore[attr-defined]
    await wait_for(pilot, "Enter saves, in one step:")
    await shots.save(pilot, "register-folder")
    await pilot.press("escape")  # type: ignore[attr-defined]  # nothing saved: the other screens stay global
    await open_action(0, 0)(pilot)
    await wait_for(pilot, "[x] Codex CLI")
    await pilot.press("end", "space")  # type: ignore[attr-defined]
    await shots.save(pilot, "agents")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "AI Understanding Import")
    await pilot.press("down")  # type: ignore[attr-defined]
    await shots.save(pilot, "agents-import")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Disclosure confirmation")
    await shots.save(pilot, "agents-disclosure")
    await pilot.press("escape", "escape", "escape")  # type: ignore[attr-defined]
    await open_action(0, 1)(pilot)
    await wait_for(pilot, "not proven", timeout=60)
    await shots.save(pilot, "check-installation")
    await pilot.press("escape")  # type: ignore[attr-defined]

    await open_action(1, 1)(pilot)
    await wait_for(pilot, "Notice:")
    await pilot.press(*"Please remember that I prefer tabs over spaces", "enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Status: processed", timeout=60)
    await shots.save(pilot, "adjust-memory")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(1, 2)(pilot)
    await wait_for(pilot, "Your recent Adjust Memory requests")
    await shots.save(pilot, "processing-status")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(1, 0)(pilot)
    await wait_for(pilot, "Authorized documents")
    await shots.save(pilot, "view-memory")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "page 1/")
    await shots.save(pilot, "view-document")
    await pilot.press("escape", "tab", *"tabs", "enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "matching line")
    await shots.save(pilot, "search")
    await pilot.press("escape")  # type: ignore[attr-defined]

    await open_action(2, 0)(pilot)
    await wait_for(pilot, "Current Configuration")
    await shots.save(pilot, "current-configuration")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(2, 2)(pilot)
    await wait_for(pilot, "Saved: mode")
    await pilot.press("down", "down", "enter")  # type: ignore[attr-defined]
    await pilot.press(*"ftp://proxy:1080", "enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "PROXY_URL_INVALID")
    await shots.save(pilot, "network-settings-error")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(2, 3)(pilot)
    await wait_for(pilot, "Outcome:", timeout=60)
    await shots.save(pilot, "connection-test")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(2, 4)(pilot)
    await wait_for(pilot, "Tokens per day, last 30 days")
    await shots.save(pilot, "usage-and-caps")
    await pilot.press("escape")  # type: ignore[attr-defined]
    await open_action(2, 5)(pilot)
    await wait_for(pilot, "Continue")
    await shots.save(pilot, "uninstall-plan")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Uninstall · Memory Data")
    await shots.save(pilot, "uninstall-memory-data")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Memory Data will be kept")
    await shots.save(pilot, "uninstall-confirm")
    await pilot.press("enter", "escape", "escape", "escape")  # type: ignore[attr-defined]


async def secrets_screen(pilot: object, shots: Shots) -> None:
    await open_action(1, 3)(pilot)
    await wait_for(pilot, "1 quarantined observation(s)")
    await shots.save(pilot, "secrets")
    await pilot.press("escape", "escape")  # type: ignore[attr-defined]


def plant_secrets(home: str) -> None:
    """A hand-edited section holding a (fake, generated) token, and a user turn that held one."""
    token = next(text for fmt, text in SECRETS if fmt == "github").split()[-1]
    paths = DataPaths(config_mod.load(home).data_root)
    with open(paths.document("preferences"), "a", encoding="utf-8") as handle:
        handle.write(f"\n## Deploy\nThe CI uses {token} to publish.\n")
    admit(paths, f"my deploy token is {token}", "capture-secret")
    cm = os.path.join(os.path.dirname(sys.executable), "cm")
    subprocess.run([cm, "flush"], capture_output=True, stdin=subprocess.DEVNULL, env=dict(os.environ), timeout=60)


def plant_agents_memory() -> str:
    """Codex's memory files in the scratch CODEX_HOME, for the import step."""
    user_home = os.path.join(ROOT, "userhome")
    os.environ["CODEX_HOME"] = os.path.join(ROOT, "codexhome")
    memories = os.path.join(ROOT, "codexhome", "memories")  # Codex only: a ~/.gemini or ~/.claude
    for name, text in (("memory_summary.md", "# Memory summary\n\n- The user maintains a Rust CLI named ferrous.\n"),
                       ("MEMORY.md", "# Memory\n\n- Prefers small pull requests.\n")):  # would add agents
        os.makedirs(memories, exist_ok=True)
        with open(os.path.join(memories, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    return user_home


def main(out: str) -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.endswith(".txt"):
            os.unlink(os.path.join(out, name))
    home = os.path.join(ROOT, "home", ".common-memory")
    os.environ["COMMON_MEMORY_HOME"] = home
    hosts = temp_hosts(ROOT, chatgpt=True)
    outside = os.path.join(ROOT, "outside")
    repo = os.path.join(ROOT, "src", "ferrous")
    os.makedirs(outside)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True, timeout=30)
    subprocess.run(["git", "-C", repo, "remote", "add", "origin", "https://github.com/example/ferrous.git"],
                   check=True, timeout=30)
    user_home = plant_agents_memory()
    shots = Shots(out)
    with fakemodel.running(os.path.join(ROOT, "fake"), {"replies": [], "policy": EDIT_POLICY}) as fake:
        async def run(app: CmApp, steps) -> None:
            async with app.run_test(size=SIZE) as pilot:
                await steps(pilot)

        asyncio.run(run(CmApp(home, discover=hosts, user_home=user_home, cwd=outside),
                        lambda p: first_run(p, shots, fake.base_url)))
        paths = DataPaths(config_mod.load(home).data_root)
        os.makedirs(paths.memory, exist_ok=True)
        with open(paths.document("preferences"), "w", encoding="utf-8") as handle:
            handle.write("# Preferences\n\n## Editor\nI use Vim keybindings, and tabs for indentation.\n")
        asyncio.run(run(CmApp(home, discover=hosts, user_home=user_home, cwd=repo),
                        lambda p: management(p, shots, home)))
        time.sleep(0.5)
    guidance = subprocess.run([os.path.join(os.path.dirname(sys.executable), "cm")], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, env=dict(os.environ), timeout=30).stdout
    with open(os.path.join(out, f"{shots.count + 1:02d}-not-a-terminal.txt"), "w", encoding="utf-8") as handle:
        handle.write("$ cm < /dev/null | cat\n" + guidance)
    shots.count += 1
    plant_secrets(home)  # after the other captures, which show memory without secrets
    asyncio.run(run(CmApp(home, discover=hosts, user_home=user_home, cwd=outside), lambda p: secrets_screen(p, shots)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/screens")
