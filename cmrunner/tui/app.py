"""The management application: which screen opens first, and how screens hand over.

Contract:
- ``start`` chooses the entry: ``manage`` (``cm``): an interrupted integration transaction is
  rolled back first, then first-run setup while no model is configured, the pending integration
  step of an interrupted setup, or Home; ``config`` (``cm config``): the model form (first run if
  nothing is configured); ``network`` (``cm config --network``); ``uninstall`` (``cm uninstall``).
- A configuration that cannot be read opens an error screen with the reason; nothing is written.
- ``discover`` is injectable so tests can present hosts without a real ChatGPT app; by default it
  is ``integrations.discovery.discover``. ``user_home`` is the folder the agents' own memory files
  are looked for in (``tui/importing.py``); by default the user's home directory. ``cwd`` is the
  folder cm runs in (Home's offer to register it, ``tui/register.py``, and the import plan); by
  default the process's working directory.
- Ctrl+C quits like Esc at the top (textual restores the terminal on every exit path).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from textual.app import App, ComposeResult
from textual.binding import Binding

from cmrunner.core.errors import CmError
from cmrunner.manage import setupstate
from cmrunner.manage.integrations import discovery, txn
from cmrunner.tui.widgets import CmScreen, Text, error_text

CSS = """
Screen { padding: 0 1; }
#title { text-style: bold; background: $primary; color: $text; padding: 0 1; margin-bottom: 1; }
#footer { dock: bottom; height: auto; }
#hint { color: $text-muted; }
#notice { display: none; margin-top: 1; }
.error { color: $error; }
.ok { color: $success; }
.column { width: 1fr; height: auto; border: round $primary; margin-right: 1; }
.column-title { text-style: bold; }
#columns { height: auto; }
#offer { margin-top: 1; }
#columns Menu { margin: 0; }
Menu, CheckList { height: auto; max-height: 16; margin: 1 0; }
#providers { height: 1fr; max-height: 100%; }
Input { margin-bottom: 1; }
.label { color: $text-muted; }
#caps { height: auto; }
#plan-box, #details-box, #detail-box { height: 1fr; min-height: 3; }
Menu.versions { max-height: 45%; }
#limits { margin-bottom: 1; }
#total { margin-top: 1; }
#choice { margin: 1 0 0 0; }
#progress { margin-top: 1; }
.cap { width: 1fr; height: auto; margin-right: 1; }
"""


UNCHANGED = "The model configuration is as it was: nothing was saved, and no client needs a restart."


class ErrorScreen(CmScreen):
    TITLE_TEXT = "cm"
    HINT = "Esc quit"
    ASKS_BEFORE_QUIT = False  # nothing to do here but leave

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def body(self) -> ComposeResult:
        yield Text(self.message, classes="error")


class DoneScreen(CmScreen):
    HINT = "Enter or Esc to leave"
    ASKS_BEFORE_QUIT = False
    BINDINGS = [Binding("enter", "back", show=False)]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.TITLE_TEXT = title
        self.message = message

    def body(self) -> ComposeResult:
        yield Text(self.message)

    def action_back(self) -> None:
        self.app.exit()


class CmApp(App):
    CSS = CSS
    TITLE = "cm"
    BINDINGS = [Binding("ctrl+c", "quit", show=False, priority=True)]

    def __init__(self, home: str, start: str = "manage",
                 discover: Callable[[], dict[str, discovery.Host]] | None = None,
                 user_home: str | None = None, cwd: str | None = None) -> None:
        super().__init__()
        self.home = home
        self.user_home = user_home or os.path.expanduser("~")
        self.cwd = cwd or os.getcwd()
        self.start = start
        self._discover = discover or discovery.discover
        self.uninstalled = False

    def discover(self) -> dict[str, discovery.Host]:
        return self._discover()

    def on_mount(self) -> None:
        try:
            txn.recover(self.home)
            self.push_screen(self.first_screen())
        except CmError as exc:
            self.push_screen(ErrorScreen(error_text(exc)))

    def first_screen(self) -> CmScreen:
        from cmrunner.tui import agents, home, settings, setup

        stage = setupstate.stage(self.home)
        if self.start == "network":
            if stage == "model":
                return ErrorScreen("No model is configured yet: run `cm` (or `cm config`) first.")
            return settings.NetworkScreen()
        if self.start == "uninstall":
            return settings.UninstallScreen()
        if stage == "model":
            return setup.ProviderScreen(setup.ModelFlow(self.home, self.setup_model_done))
        if self.start == "config":
            return setup.ProviderScreen(setup.ModelFlow(self.home, self.config_shortcut_done))
        if stage == "integrations":
            pending = setupstate.pending(self.home) or {}
            return agents.AgentsScreen(setup=True, preselect=pending.get("selected"))
        return home.HomeScreen()

    # -- hand-overs ------------------------------------------------------------------------------

    def _reset(self, screen: CmScreen) -> None:
        """Drop every screen above the default one, then show ``screen``."""
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(screen)

    def setup_model_done(self, _changed: bool) -> None:
        from cmrunner.tui import agents

        setupstate.begin_integrations(self.home)
        self._reset(agents.AgentsScreen(setup=True))

    def config_shortcut_done(self, changed: bool) -> None:
        if changed:
            from cmrunner.tui.home import restart_line

            self._reset(DoneScreen("Model saved", "The model configuration was saved. " + restart_line(self.home, "use it")))
        else:
            self._reset(DoneScreen("Model unchanged", UNCHANGED))

    def change_model_done(self, changed: bool) -> None:
        from cmrunner.tui.home import HomeScreen, restart_line

        while not isinstance(self.screen, HomeScreen):
            self.pop_screen()
        self.screen.notice.show("Model saved. " + restart_line(self.home, "use it") if changed else UNCHANGED, "ok")

    def setup_complete(self, notice: str | None = None) -> None:
        """The first run's last screen leads on to Home (it used to quit while saying to run cm again),
        with ``notice`` shown there when the last step had something to say."""
        from cmrunner.tui.home import HomeScreen

        self._reset(HomeScreen(notice))

    def offer_import(self, chosen: list[str]) -> None:
        """The first run's step after the agents: bring in what the chosen agents already know."""
        from cmrunner.tui.importing import ImportScreen

        self._reset(ImportScreen(chosen, setup=True))

    def show_result(self, screen: CmScreen) -> None:
        """Show an Agent Integration result on top of Home (or alone during first run)."""
        from cmrunner.tui.home import HomeScreen

        while len(self.screen_stack) > 1 and not isinstance(self.screen, HomeScreen):
            self.pop_screen()
        self.push_screen(screen)

    def open_action(self, action: str) -> None:
        from cmrunner.tui import agents, history, importing, memory, secrets, settings, setup, usage

        screens: dict[str, Callable[[], CmScreen]] = {
            "agents": lambda: agents.AgentsScreen(),
            "check": lambda: CheckScreen(),
            "import": lambda: importing.ImportScreen(agents.installed_ids(self.home)),
            "view": memory.ViewMemoryScreen,
            "adjust": memory.AdjustScreen,
            "status": memory.StatusScreen,
            "secrets": secrets.SecretsScreen,
            "history": history.HistoryScreen,
            "trash": history.TrashScreen,
            "config": settings.ConfigScreen,
            "model": lambda: setup.ProviderScreen(setup.ModelFlow(self.home, self.change_model_done)),
            "network": settings.NetworkScreen,
            "test": settings.TestScreen,
            "usage": usage.UsageScreen,
            "uninstall": settings.UninstallScreen,
        }
        self.push_screen(screens[action]())


class CheckScreen(CmScreen):
    TITLE_TEXT = "Agent Integration · Installation check"
    HINT = "PgUp/PgDn scroll · Esc back"

    def body(self) -> ComposeResult:
        yield Text("Checking …", id="checks")

    def on_mount(self) -> None:
        self.run_worker(self._check, thread=True, exclusive=True)

    def _check(self) -> None:
        from cmrunner.manage.integrations import checks

        lines = checks.summary_lines(self.app.home)  # type: ignore[attr-defined]
        self.app.call_from_thread(self.query_one("#checks", Text).set, "\n".join(lines))


def run(home: str, start: str = "manage") -> None:
    CmApp(home, start).run()
