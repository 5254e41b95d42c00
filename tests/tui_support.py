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
- ``check_fits(pilot)`` is the one check that a screen fits its terminal (see its docstring); it fails
  when it found nothing to check.
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


SHARED_KEYS = "q quit · ? help"
SCROLLBAR = "▁▂▃▄▅▆▇█ "  # a scrolled box's bar may share the footer's last row


def _scrolls_y(widget: object) -> bool:
    """Holds more rows than it shows, and can scroll to them (overflow ``hidden`` cannot)."""
    return widget.max_scroll_y > 0 and widget.styles.overflow_y in ("auto", "scroll")  # type: ignore[attr-defined]


def _scrolls(widget: object) -> bool:
    return _scrolls_y(widget) or (widget.max_scroll_x > 0  # type: ignore[attr-defined]
                                  and widget.styles.overflow_x in ("auto", "scroll"))  # type: ignore[attr-defined]


def cut_widgets(screen: object) -> list[str]:
    """Widgets shown only in part with no way to see the rest: clipped by an ancestor (or the
    screen) that cannot scroll them into view, or a text block whose own lines need more rows
    (or, not wrapping, more columns without an ellipsis) than it has and which does not scroll."""
    from textual.widgets import Static

    found: list[str] = []
    for widget, geometry in screen._compositor.full_map.items():  # type: ignore[attr-defined]
        if widget is screen or not widget.display or not widget.region.area:
            continue
        region, clip = geometry.region, geometry.clip
        if not clip.contains_region(region) and clip.intersection(region).area:
            ancestors = [a for a in widget.ancestors_with_self[1:] if hasattr(a, "max_scroll_y")]
            if not any(_scrolls(a) for a in ancestors):
                found.append(f"{widget!r} at {region} clipped to {clip}")
        if isinstance(widget, Static) and not _scrolls(widget):
            content = widget.content_region
            needed = widget.get_content_height(content.size, screen.size, content.width)  # type: ignore[attr-defined]
            if needed > content.height:
                found.append(f"{widget!r} needs {needed} rows, has {content.height}")
            if widget.styles.text_wrap == "nowrap" and widget.styles.text_overflow != "ellipsis":
                wide = widget.get_content_width(content.size, screen.size)  # type: ignore[attr-defined]
                if wide > content.width:
                    found.append(f"{widget!r} needs {wide} columns, has {content.width}, no ellipsis")
    return found


async def check_fits(pilot: object) -> str:
    """The current screen fits the pilot's terminal: its footer (the screen's keys with Esc, then
    ``q quit · ? help``) is whole and the last thing shown; no widget or text block is cut
    (``cut_widgets``); and whatever holds more than it shows scrolls: PgDn scrolls at least one such
    box (others may be scrolled by focus and arrows) without moving a highlight in a list that did not
    scroll, and PgUp scrolls back. Fails when there is no footer or no widget to check. Returns the
    screen's flat text."""
    from textual.widgets import OptionList

    app = pilot.app  # type: ignore[attr-defined]
    screen = app.screen
    assert list(screen.query("#hint")), f"no footer found on {screen!r}"
    footer = screen.footer()
    assert "Esc" in footer and footer.endswith(SHARED_KEYS), footer
    shown = flat(screen_text(app))
    assert flat(footer) in shown, (footer, screen_text(app))
    assert shown.rstrip(SCROLLBAR).rstrip().endswith(flat(footer)), screen_text(app)
    widgets = [w for w in screen._compositor.full_map if w is not screen and w.display and w.region.area]
    assert len(widgets) > 2, f"nothing to check on {screen!r} beyond its frame"
    cut = cut_widgets(screen)
    assert not cut, "\n".join(cut) + "\n" + screen_text(app)
    boxes = [w for w in [screen, *widgets] if hasattr(w, "max_scroll_y") and _scrolls_y(w)]
    if boxes:
        before = {id(b): b.scroll_y for b in boxes}
        lists = {id(w): w.highlighted for w in widgets if isinstance(w, OptionList)}
        await pilot.press("pagedown")  # type: ignore[attr-defined]
        await pilot.pause(0.2)  # type: ignore[attr-defined]
        moved = [b for b in boxes if b.scroll_y > before[id(b)]]
        assert moved, f"PgDn scrolled none of {boxes!r}\n{screen_text(app)}"
        for w in widgets:
            if isinstance(w, OptionList) and w not in moved:
                assert w.highlighted == lists[id(w)], f"PgDn moved the highlight of {w!r}"
        for b in boxes:
            assert b in moved or b.can_focus, f"{b!r} holds more than it shows and neither PgDn nor focus scrolls it"
        await pilot.press("pageup")  # type: ignore[attr-defined]
        await pilot.pause(0.2)  # type: ignore[attr-defined]
        assert all(b.scroll_y <= before[id(b)] for b in moved), "PgUp did not scroll back"
        shown = flat(screen_text(app))
    return shown
