"""The model form's agent-CLI step: an agent CLI the user already has runs the Memory Agent (issue 33).

Contract: reached from the Provider step when a found CLI is chosen (``setup.ProviderScreen``).
It asks for no key (the CLI uses its own login). Nothing is written until the runtime's check
passed: ``agentsetup.check``, the one `cm network-test` runs on an agent-CLI runtime (one confined
headless run with a fixed synthetic task), in a worker thread; then ``agentsetup.commit`` saves
``remote.provider: agent-cli``, ``remote.agent`` and ``remote.agentPath`` and the flow's ``done``
decides what comes next, as after an API-key model. A failed check stays on this step with its
code and fix, Retry and Back; nothing changed. Choosing the CLI that is already configured
changes nothing and says so (``done(False)``), without a run.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.widgets import OptionList

from cmrunner.core.errors import CmError
from cmrunner.manage import agentsetup
from cmrunner.tui.widgets import FormScreen, Menu, Text, error_text, option


class AgentCliScreen(FormScreen):
    TITLE_TEXT = "Model setup · Agent CLI"
    HINT = "Esc back · no API key: the CLI uses its own login"

    def __init__(self, home: str, done: Callable[[bool], None], offer: agentsetup.Offer) -> None:
        """``done`` is the model form's (``setup.ModelFlow.done``): whether the configuration changed."""
        super().__init__()
        self.home = home
        self.done = done
        self.offer = offer

    def body(self) -> ComposeResult:
        yield Text(f"{self.offer.title} at {self.offer.binary} will run your Memory Agent with its own login: "
                   "no API key, only cm's memory tools, in an empty private folder; your hooks and settings "
                   "are not loaded.")
        yield Text("", id="status")
        yield Menu([], id="actions")

    def on_mount(self) -> None:
        try:
            changed = agentsetup.would_change(self.home, self.offer)
        except CmError as exc:
            self._checked(exc)
            return
        if not changed:
            self.done(False)
            return
        self.start()

    def start(self) -> None:
        self.query_one("#status", Text).set(f"Checking {self.offer.title}: one headless run with a small test "
                                            "task, as `cm network-test` makes it …")
        self.query_one("#actions", Menu).display = False
        self.notice.clear()
        self.run_worker(self._check, thread=True, exclusive=True)

    def _check(self) -> None:
        try:
            agentsetup.check(self.home, self.offer)
            failed: CmError | None = None
        except CmError as exc:
            failed = exc
        self.app.call_from_thread(self._checked, failed)

    def _checked(self, failed: CmError | None) -> None:
        if failed is None:
            try:
                agentsetup.commit(self.home, self.offer)
            except CmError as exc:
                failed = exc
        if failed is None:
            self.done(True)
            return
        self.query_one("#status", Text).set(f"{self.offer.title} was not saved; nothing changed.")
        self.notice.show(error_text(failed))
        menu = self.query_one("#actions", Menu)
        menu.clear_options()
        menu.add_options([option("retry", "Retry the check"), option("back", "Back: choose another provider")])
        menu.highlighted = 0
        menu.display = True
        menu.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if str(event.option_id) == "retry":
            self.start()
        else:
            self.app.pop_screen()
