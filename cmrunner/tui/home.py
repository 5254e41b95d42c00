"""Home: three columns — Agent Integration, Memory Control, Model & Configuration.

Contract: ↑↓ move inside a column, ←→ switch columns, Enter opens the highlighted action, Esc
quits. The status line comes from the configuration, the private ``.env``'s key presence and the
integrations manifest only (no network, no SQLite). The last action opened is remembered in
``<home>/tui.json`` and highlighted at the next start.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.manage import providers, setupstate
from cmrunner.manage.integrations import discovery, manager
from cmrunner.tui.widgets import CmScreen, Menu, Text

# Every host the agents screen manages, in its order, by the name people use for it.
SHORT_NAMES = {"codex": "Codex", "claude-code": "Claude Code", "gemini": "Gemini", "pi": "Pi", "chatgpt": "ChatGPT"}
AGENTS_LABEL = "Choose agents (" + ", ".join(SHORT_NAMES.get(h, discovery.TITLES[h]) for h in discovery.LISTED) + ")"

COLUMNS = (
    ("Agent Integration", (("agents", AGENTS_LABEL), ("check", "Check installation"),
                           ("import", "Bring in what agents know"))),
    ("Memory Control", (("view", "Search / View Memory"), ("adjust", "Adjust Memory"),
                        ("status", "Processing Status"), ("secrets", "Secrets"), ("history", "History & Undo"),
                        ("trash", "Trash"))),
    ("Model & Configuration", (("config", "Current Configuration"), ("model", "Change Model / Provider"),
                               ("network", "Network Settings"), ("test", "Model Connection Test"),
                               ("usage", "Usage & Spend Caps"), ("uninstall", "Uninstall cm"))),
)


def status_line(home: str) -> str:
    try:
        remote = config_mod.load(home).remote
    except CmError as exc:
        return f"config.json is invalid: {exc.code}"
    key = "set" if providers.key_configured(home) else "MISSING"
    model = ("no model configured" if not remote else f"Memory Agent: {config_mod.runtime_label(remote)}"
             if config_mod.is_agent_cli(remote) else f"model {remote['model']} at {remote['baseUrl']} · key {key}")
    try:
        installed = manager.installed(home)
        agents = ", ".join(discovery.TITLES[h] for h in discovery.HOST_IDS if h in installed) or "none"
    except CmError:
        agents = "unknown (manifest damaged)"
    return f"{model} · agents: {agents}"


def restart_line(home: str, what: str) -> str:
    """Who must restart to ``what`` (``"use it"``): only the agents cm installed, or nobody."""
    try:
        installed = manager.installed(home)
    except CmError:
        return f"Restart the agents you connected to cm so they {what}."
    names = [discovery.TITLES[h] for h in discovery.LISTED if h in installed]
    if not names:
        return "No agent is connected to cm yet, so nothing needs a restart."
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"Restart {listed} if running, so they {what}."


class HomeScreen(CmScreen):
    TITLE_TEXT = "cm · Common Memory"
    HINT = "↑↓ move · ←→ column · Enter open · Esc quit"
    ASKS_BEFORE_QUIT = False  # the top: Esc and q leave at once, as its footer says
    BINDINGS = [Binding("left", "column(-1)", show=False), Binding("right", "column(1)", show=False)]

    def __init__(self, notice: str | None = None) -> None:
        """``notice``: a line from the step that led here (the first run's last step), shown once."""
        super().__init__()
        self.first_notice = notice

    def body(self) -> ComposeResult:
        yield Text("", id="status")
        with Horizontal(id="columns"):
            for index, (title, items) in enumerate(COLUMNS):
                with Vertical(classes="column"):
                    yield Text(title, classes="column-title")
                    yield Menu(items, id=f"column-{index}")

    def on_mount(self) -> None:
        self.refresh_status()
        if self.first_notice:
            self.notice.show(self.first_notice, "ok")
        last = setupstate.last_action(self.app.home)  # type: ignore[attr-defined]
        for index, (_title, items) in enumerate(COLUMNS):
            keys = [k for k, _label in items]
            if last in keys:
                menu = self.query_one(f"#column-{index}", Menu)
                menu.highlighted = keys.index(last)
                menu.focus()
                return
        self.query_one("#column-0", Menu).focus()

    def on_screen_resume(self) -> None:
        self.refresh_status()

    def refresh_status(self) -> None:
        self.query_one("#status", Text).set(status_line(self.app.home))  # type: ignore[attr-defined]

    def action_column(self, step: int) -> None:
        menus = list(self.query(Menu))
        focused = self.focused
        index = menus.index(focused) if focused in menus else 0
        target = menus[(index + step) % len(menus)]
        if target.highlighted is None:
            target.highlighted = 0
        target.focus()

    def action_back(self) -> None:
        self.app.exit()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        action = str(event.option_id)
        setupstate.remember_action(self.app.home, action)  # type: ignore[attr-defined]
        self.notice.clear()
        self.app.open_action(action)  # type: ignore[attr-defined]
