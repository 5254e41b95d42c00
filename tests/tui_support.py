"""Helpers for the management-UI tests: plain-text screens, waits, hosts in temp folders, tmux.

- ``screen_text(app)`` renders the current screen as plain text (what a person sees, no colour);
  the same text is what ``docs/screens/`` holds.
- ``drive(app, steps)`` runs an app under textual's pilot in this process (``asyncio.run``).
- ``temp_hosts(tmp, …)`` discovers hosts from a made-up environment: ``CODEX_HOME`` and
  ``PI_CODING_AGENT_DIR`` in the test's folder, ``HOME`` there too (Claude Code, Gemini CLI), and
  optionally a ChatGPT.app folder on "darwin".
- ``Tmux`` runs the real ``cm`` in a tmux pane (a real pseudo-terminal) with send-keys and
  capture-pane; every session is killed by name afterwards.
- ``model_form(pilot, base_url)`` fills the setup wizard's provider, base URL and key steps;
  ``first_run(pilot, base_url)`` goes on through the model list and the agents to their result.
- ``EDIT_POLICY`` names ``support/edit_policy.py``, the fake model's policy for edit tasks.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable

from rich.console import Console

from cmrunner.manage import providers
from cmrunner.manage.integrations import discovery

KEY = "sk-test-0000-not-a-real-key"
EDIT_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "edit_policy.py") + ":edit_policy"


def screen_text(app: object) -> str:
    width, height = app.size  # type: ignore[attr-defined]
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None,
                      record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True,  # type: ignore[attr-defined]
                                                       screen_stack=app._background_screens))  # type: ignore[attr-defined]
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def flat(text: str) -> str:
    """The screen's words with every run of whitespace (line wraps included) made one space."""
    return " ".join(text.split())


async def wait_for(pilot: object, needle: str | Callable[[str], bool], timeout: float = 15.0) -> str:
    """Wait until ``needle`` shows (compared on ``flat`` text); returns the flat screen text."""
    check = (lambda text: flat(needle) in text) if isinstance(needle, str) else needle
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        text = flat(screen_text(pilot.app))  # type: ignore[attr-defined]
        if check(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {needle!r}; the screen shows:\n{text}")


async def model_form(pilot: object, base_url: str, key: str = KEY) -> None:
    """The setup wizard's first three steps: the first preset (OpenAI), ``base_url``, ``key``."""
    await wait_for(pilot, "1/4 Provider")
    await pilot.press("enter")  # type: ignore[attr-defined]  # OpenAI, the first preset
    await wait_for(pilot, "2/4 Base URL")
    assert "https://api.openai.com/v1" in screen_text(pilot.app)  # type: ignore[attr-defined]  # the preset's prefill
    pilot.app.screen.query_one("#url").value = base_url  # type: ignore[attr-defined]
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "3/4 API key")
    await pilot.press(*key)  # type: ignore[attr-defined]
    assert key not in screen_text(pilot.app)  # type: ignore[attr-defined]  # the field is hidden
    await pilot.press("enter")  # type: ignore[attr-defined]


async def first_run(pilot: object, base_url: str) -> str:
    """The whole first run up to its agents' result: the model form with the fake model's one model,
    then Enter on the agents checklist as ticked; returns the result screen's flat text."""
    await model_form(pilot, base_url)
    await wait_for(pilot, "fake-model")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "Agent Integration")
    await pilot.press("enter")  # type: ignore[attr-defined]
    return await wait_for(pilot, "Installation check:", timeout=60)


def open_action(action: str, then: Callable[[object], Awaitable[None]]) -> Callable[[object], Awaitable[None]]:
    """Steps that open one Home action by highlighting it directly (keyboard navigation has its own
    test), then run ``then``."""
    from cmrunner.tui.home import COLUMNS

    column, index = next((c, [k for k, _ in items].index(action)) for c, (_t, items) in enumerate(COLUMNS)
                         if action in [k for k, _ in items])

    async def steps(pilot: object) -> None:
        await wait_for(pilot, "cm · Common Memory")
        menu = pilot.app.screen.query_one(f"#column-{column}")  # type: ignore[attr-defined]
        menu.focus()
        menu.highlighted = index
        await pilot.press("enter")  # type: ignore[attr-defined]
        await then(pilot)

    return steps


def drive(app: object, steps: Callable[[object], Awaitable[None]], size: tuple[int, int] = (110, 40)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:  # type: ignore[attr-defined]
            await steps(pilot)

    asyncio.run(main())


def temp_hosts(tmp: str, pi: bool = True, codex: bool = True, chatgpt: bool = False, claude: bool = False,
               gemini: bool = False, path: str = "/usr/bin:/bin") -> Callable[[], dict[str, discovery.Host]]:
    codex_home = os.path.join(tmp, "codexhome")
    pi_dir = os.path.join(tmp, "piagent")
    app = os.path.join(tmp, "Applications", "ChatGPT.app")
    user_home = os.path.join(tmp, "userhome")  # Claude Code's and Gemini CLI's folders, never the real ones
    for wanted, folder in ((codex, codex_home), (pi, pi_dir), (chatgpt, app),
                           (claude, os.path.join(user_home, ".claude")), (gemini, os.path.join(user_home, ".gemini"))):
        if wanted:
            os.makedirs(folder, exist_ok=True)
    env = {"CODEX_HOME": codex_home, "PI_CODING_AGENT_DIR": pi_dir, "PATH": path, "HOME": user_home}
    return lambda: discovery.discover(env, "darwin" if chatgpt else "linux", (app,))


def configure_model(home: str, base_url: str, key: str | None = KEY) -> None:
    providers.commit_model(home, providers.ModelChoice("openai", base_url, "fake-model"), key)


class Tmux:
    """One tmux session running a command in a real pseudo-terminal."""

    def __init__(self, name: str, command: str, env: dict[str, str], width: int = 110, height: int = 36) -> None:
        if shutil.which("tmux") is None:
            raise AssertionError("tmux is required for the terminal tests (Debian: apt-get install tmux)")
        self.name = name
        args = ["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height)]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        subprocess.run(args + [command], check=True, timeout=10)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True, timeout=10)

    def text(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", *keys], check=True, timeout=10)

    def capture(self) -> str:
        proc = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,
                              timeout=10)
        return proc.stdout

    def wait(self, needle: str, timeout: float = 20.0) -> str:
        # Polls: the timeout only bounds a hang; a loaded machine just takes more polls.
        deadline = time.monotonic() + timeout
        while True:
            screen = self.capture()
            if needle in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {needle!r} in tmux; the pane shows:\n{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, timeout=10)
