"""Agent Integration: the Pi / Codex / ChatGPT / Claude Code / Gemini CLI checklist, the optional import step, and the result.

Contract: the checklist starts from the managed installation state (or, when an interrupted first
run resumes, from the selection it recorded). Space toggles, Enter continues; Esc cancels every
uncommitted change. Unavailable agents stay visible, disabled, with the reason; the highlighted
agent's limits show below the list. Choosing
ChatGPT offers AI Understanding Import (off by default); when it needs ``agent_observation``
disclosure the user confirms that separately and the change commits with the installation.
Applying is ``manager.plan`` + ``manager.apply`` (one transaction); a refusal is shown in place and
nothing was written. The result screen lists what changed and runs the installation checks in a
worker thread, saying what they proved and what they cannot; during the first run its Enter leads
on to bringing in what the chosen agents already know (``tui/importing.py``).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.manage import setupstate
from cmrunner.manage.integrations import checks, discovery, manager, txn
from cmrunner.tui.widgets import PRIORITY_PAGING, CheckList, CmScreen, Menu, Text, error_text


def _state_line(host: discovery.Host, installed: dict) -> str:
    """One line per host; an unavailable one says why."""
    if host.id in installed:
        return f"{host.title}: installed by cm — {host.found}"
    if host.available:
        return f"{host.title}: available — {host.found}"
    return f"{host.title}: unavailable — {host.limits if host.found == 'not found' else host.found}"


def _limits_line(host: discovery.Host) -> str:
    return f"{host.title}, limits: {host.limits}."


class AgentsScreen(CmScreen):
    TITLE_TEXT = "Agent Integration"
    HINT = "↑↓ move · Space toggle · Enter apply · PgDn details · Esc cancel"
    BINDINGS = PRIORITY_PAGING
    PAGE_TARGET = "#details-box"

    def __init__(self, setup: bool = False, preselect: list[str] | None = None) -> None:
        super().__init__()
        self.setup = setup
        self.preselect = preselect
        self.hosts: dict[str, discovery.Host] = {}
        self.installed: dict = {}

    def body(self) -> ComposeResult:
        home = self.app.home  # type: ignore[attr-defined]
        self.hosts = self.app.discover()  # type: ignore[attr-defined]
        try:
            self.installed = manager.installed(home)
        except CmError as exc:
            self.installed = {}
            yield Text(error_text(exc), classes="error")
        if self.preselect is not None:
            chosen = set(self.preselect)
        elif self.setup:  # first run: every agent found here starts ticked
            chosen = {h.id for h in self.hosts.values() if h.available}
        else:
            chosen = set(self.installed)
        intro = ("Choose the agents cm should connect to. Space toggles, Enter installs the checked ones."
                 if self.setup else "Checked agents stay or get installed; unchecking removes only what cm installed.")
        yield Text(intro)
        usable = {h.id for h in self.hosts.values() if h.available or h.id in self.installed}
        yield CheckList([(h.id, h.title + ("" if h.id in usable else "  (unavailable)"),
                          h.id in chosen and h.id in usable, h.id not in usable) for h in self.hosts.values()],
                        id="agents")
        yield Text("", id="limits")  # the highlighted agent's limits: five agents' worth would push errors off screen
        with VerticalScroll(id="details-box"):  # long paths wrap: at 80×24 this part scrolls, not the list
            yield Text("\n".join(_state_line(h, self.installed) for h in self.hosts.values()), id="details")

    def quit_question(self) -> str:
        if self.setup:
            return ("Quit setup? The model is saved; no agent is connected yet, and the next `cm` opens this "
                    "step again.")
        return super().quit_question()

    def on_mount(self) -> None:
        checklist = self.query_one("#agents", CheckList)
        checklist.highlighted = next((i for i, h in enumerate(self.hosts.values())
                                      if not checklist.get_option_at_index(i).disabled), None)
        checklist.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        host = self.hosts.get(event.option.id or "")
        if host is not None:
            self.query_one("#limits", Text).set(_limits_line(host))

    def on_check_list_continued(self, event: CheckList.Continued) -> None:
        selected = event.selected
        if "chatgpt" in selected:
            current = bool(self.installed.get("chatgpt", {}).get("init"))
            self.app.push_screen(InitScreen(self, selected, current))
        else:
            self.proceed(selected, False, False)

    def proceed(self, selected: list[str], init: bool, grant: bool) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        try:
            if self.setup:
                setupstate.record_selection(home, selected, init)
            with txn.locked(home):  # one hold for the plan and its apply, as `cm agents` does
                planned = manager.plan(home, selected, init, grant, hosts=self.hosts)
                manager.apply(home, planned)
            if self.setup:
                setupstate.finish(home)
        except CmError as exc:
            while self.app.screen is not self:
                self.app.pop_screen()
            self.notice.show(error_text(exc, "nothing was changed"))
            return
        self.app.show_result(ResultScreen(planned, self.setup))  # type: ignore[attr-defined]


def installed_ids(home: str) -> list[str]:
    """The agents cm has installed (an unreadable manifest counts as none: the import step only orders by it)."""
    try:
        return list(manager.installed(home))
    except CmError:
        return []


class InitScreen(CmScreen):
    TITLE_TEXT = "Agent Integration · ChatGPT: AI Understanding Import"

    def __init__(self, agents: AgentsScreen, selected: list[str], current: bool) -> None:
        super().__init__()
        self.agents = agents
        self.selected = selected
        self.current = current

    def body(self) -> ComposeResult:
        yield Text("Optional: a separate import server lets ChatGPT submit what it already understands about you "
                   "(memory_init). ChatGPT asks before every call; the Writer decides what to keep and keeps the "
                   "source visible. Leave it off unless you want to import.")
        yield Menu([("skip", "Do not install the import server"),
                    ("init", "Install the import server (memory_init, memory_status)")], id="init")

    def on_mount(self) -> None:
        menu = self.query_one("#init", Menu)
        menu.highlighted = 1 if self.current else 0
        menu.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id == "skip":
            self.agents.proceed(self.selected, False, False)
            return
        cfg = config_mod.load(self.app.home)  # type: ignore[attr-defined]
        if "agent_observation" in cfg.disclosure.allowed_provenance:
            self.agents.proceed(self.selected, True, False)
        else:
            self.app.push_screen(DisclosureScreen(self.agents, self.selected))


class DisclosureScreen(CmScreen):
    TITLE_TEXT = "Agent Integration · Disclosure confirmation"

    def __init__(self, agents: AgentsScreen, selected: list[str]) -> None:
        super().__init__()
        self.agents = agents
        self.selected = selected

    def body(self) -> ComposeResult:
        yield Text("Imported understanding is another agent's summary (agent_observation), not your own words. "
                   "To process it, cm must allow agent_observation in disclosure.allowedProvenance: such material "
                   "is then sent to your configured model. This is saved together with the installation.")
        yield Menu([("no", "Do not allow it (install without the import server)"),
                    ("yes", "Allow agent_observation and install the import server")], id="confirm")

    def on_mount(self) -> None:
        self.query_one("#confirm", Menu).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id == "yes":
            self.agents.proceed(self.selected, True, True)
        else:
            self.agents.proceed(self.selected, False, False)


class ResultScreen(CmScreen):
    TITLE_TEXT = "Agent Integration · Result"
    HINT = "PgUp/PgDn scroll · Enter or Esc to continue"
    BINDINGS = [Binding("enter", "onward", show=False)]

    def __init__(self, planned: manager.Plan, setup: bool) -> None:
        super().__init__()
        self.planned = planned
        self.setup = setup
        if setup:  # the same promise as the body's last setup line
            self.HINT = "PgDn scroll · Enter next: bring in what your agents know, then Home · Esc quit"

    def body(self) -> ComposeResult:
        names = lambda hosts: ", ".join(discovery.TITLES[h] for h in hosts) or "none"  # noqa: E731
        lines = [f"Installed: {names(self.planned.install)}", f"Removed:   {names(self.planned.remove)}",
                 f"Kept:      {names(self.planned.keep)}"]
        if self.planned.grant:
            lines.append("Disclosure: agent_observation is now allowed (saved with the installation).")
        lines += self.planned.notes
        if self.setup:
            lines.append("Setup is complete. Enter: bring in what your agents already know (you see the plan "
                         "first), then cm's home screen; Esc quits.")
        if "codex" in self.planned.selected:
            lines.append("Codex: start it with `codex --profile common-memory` and trust the hooks in /hooks.")
        for host in ("claude-code", "gemini"):
            if host in self.planned.install:
                lines.append(f"{discovery.TITLES[host]}: new sessions load the hooks and the read server, in "
                             "folders you trust.")
        yield Text("\n".join(lines))
        yield Text("Checking the installation …", id="checks")

    def on_mount(self) -> None:
        self.run_worker(self._check, thread=True, exclusive=True)

    def _check(self) -> None:
        lines = checks.summary_lines(self.app.home)  # type: ignore[attr-defined]
        self.app.call_from_thread(self.query_one("#checks", Text).set, "Installation check:\n" + "\n".join(lines))

    def action_onward(self) -> None:
        if self.setup:
            self.app.offer_import(self.planned.selected)  # type: ignore[attr-defined]
        else:
            self.app.pop_screen()

    def quit_question(self) -> str:
        return "Quit cm? Setup is complete; `cm` opens the home screen next time." if self.setup \
            else super().quit_question()

    def action_back(self) -> None:
        if not self.setup:
            self.app.pop_screen()
        elif self.may_quit("escape"):
            self.app.exit()
