"""Home: three columns — Agent Integration, Memory Control, Model & Configuration.

Contract: ↑↓ move inside a column, ←→ switch columns, Enter opens the highlighted action, Esc
quits. The status line comes from the configuration, the private ``.env``'s key presence and the
integrations manifest only (no network, no SQLite). The last action opened is remembered in
``<home>/tui.json`` and highlighted at the next start.
When the folder cm runs in is a project root no registered project holds
(``projectaccess.folder_offer``, the detection `cm import` uses: no network, git only to match a
project known from another machine), one more entry above the columns offers to register it
(``tui/register.py``); ``r`` opens it too, and ←→ reach it. It is looked for again whenever Home
shows, so it is gone once the folder is registered.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.manage import projectaccess, providers, setupstate
from cmrunner.manage.integrations import discovery, manager
from cmrunner.tui.register import RegisterScreen, offer_label
from cmrunner.tui.widgets import PRIORITY_PAGING, CmScreen, Menu, Text, error_text, option

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
    OFFER_HINT = "↑↓ move · ←→ column · Enter open · r register · Esc quit"
    # PgDn/PgUp scroll Home itself (a long notice can push the columns' ends below 24 rows); ↑↓ move
    BINDINGS = [Binding("left", "column(-1)", show=False), Binding("right", "column(1)", show=False),
                Binding("r", "register", show=False), *PRIORITY_PAGING]

    def __init__(self, notice: str | None = None) -> None:
        """``notice``: a line from the step that led here (the first run's last step), shown once."""
        super().__init__()
        self.first_notice = notice
        self.offer: projectaccess.FolderOffer | None = None

    def body(self) -> ComposeResult:
        yield Text("", id="status")
        yield Menu([], id="offer", compact=True)
        with Horizontal(id="columns"):
            for index, (title, items) in enumerate(COLUMNS):
                with Vertical(classes="column"):
                    yield Text(title, classes="column-title")
                    yield Menu(items, id=f"column-{index}")

    def on_mount(self) -> None:
        self.refresh_status()
        self.refresh_offer()
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
        self.refresh_offer()

    def refresh_offer(self) -> None:
        """Show the offer to register the folder cm runs in, or hide it (see module contract)."""
        try:
            found = projectaccess.folder_offer(self.app.home, self.app.cwd)  # type: ignore[attr-defined]
        except CmError:
            found = None  # an unreadable registry: `cm status` and `cm project list` say why
        # a registered folder is not offered here, even when its memory is not allowed yet
        self.offer = found if found is not None and found.registered is None else None
        menu = self.query_one("#offer", Menu)
        menu.clear_options()
        if self.offer is not None:
            menu.add_options([option("register", offer_label(self.offer))])
        menu.display = self.offer is not None
        self.set_hint(self.OFFER_HINT if self.offer is not None else type(self).HINT)
        if self.offer is None and self.focused is menu:
            self.query_one("#column-0", Menu).focus()

    def action_register(self) -> None:
        if self.offer is None:
            return
        try:
            seen = projectaccess.preview(self.app.home, self.offer.path, self.offer.name)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc, "nothing was registered"))
            return
        self.notice.clear()
        self.app.push_screen(RegisterScreen(seen))

    def refresh_status(self) -> None:
        self.query_one("#status", Text).set(status_line(self.app.home))  # type: ignore[attr-defined]

    def action_column(self, step: int) -> None:
        menus = [menu for menu in self.query(Menu) if menu.display]
        focused = self.focused
        index = menus.index(focused) if focused in menus else 0
        target = menus[(index + step) % len(menus)]
        if target.highlighted is None:
            target.highlighted = 0
        target.focus()

    def action_back(self) -> None:
        self.app.exit()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "offer":
            self.action_register()
            return
        action = str(event.option_id)
        setupstate.remember_action(self.app.home, action)  # type: ignore[attr-defined]
        self.notice.clear()
        self.app.open_action(action)  # type: ignore[attr-defined]
