"""Memory Control · Secrets: what looks like a secret in memory, marking it as not secret, the quarantine.

Contract:
- Every finding comes from ``secretreport`` (the functions ``cm secrets`` uses): one row per
  finding in the form of ``cm secrets list`` — document, section (its number when the heading
  itself holds the secret), rule, state (withheld / allowed) and fingerprint; never the value.
- Enter on a row asks, on one line, to mark it as not a secret (``secretreport.allow``) or to
  withhold it again (``secretreport.disallow``); ``y`` confirms, ``n`` or Esc cancels. ``p`` asks to
  delete now the text of the quarantined observations that looked like secrets, saying how many
  (``secretreport.purge_quarantine``). After every change the list is read again.
- The scan and the changes run off the UI thread (the deep scan imports detect-secrets); a
  ``CmError`` is shown in the notice line with ``widgets.error_text``, nothing else changes.
"""

from __future__ import annotations

import functools

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import OptionList

from cmrunner.core.errors import CmError
from cmrunner.tui.widgets import ConfirmingScreen, Menu, Text, error_text, option
from cmrunner.views import secretreport

EMPTY = "No memory section looks like a secret."
QUESTION = " y yes · n no"


class SecretsScreen(ConfirmingScreen):
    TITLE_TEXT = "Memory Control · Secrets"
    HINT = "↑↓ move · Enter not a secret / withhold again · p purge quarantined text · Esc back"
    BINDINGS = [Binding("p", "ask_purge", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.report: secretreport.Report | None = None
        self.pending: tuple[str, str] | None = None  # (allow | disallow | purge, fingerprint)

    def body(self) -> ComposeResult:
        yield Text("Scanning memory for secrets …", id="summary")
        yield Menu([], id="findings")
        yield Text("", id="quarantine")

    def on_mount(self) -> None:
        self.query_one("#findings", Menu).display = False
        self._start(None)

    # -- background work ---------------------------------------------------------------------------

    def _start(self, action: tuple[str, str] | None) -> None:
        self.run_worker(functools.partial(self._work, action), thread=True, exclusive=True)

    def _work(self, action: tuple[str, str] | None) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        done = ""
        try:
            if action is not None:
                done = self._apply(home, action)
            report = secretreport.gather(home, previews=True)
        except CmError as exc:
            self.app.call_from_thread(self.notice.show, error_text(exc, "nothing was changed" if action and not done
                                                                   else ""))
            return
        self.app.call_from_thread(self.show_report, report, done)

    def _apply(self, home: str, action: tuple[str, str]) -> str:
        kind, fingerprint = action
        if kind == "purge":
            return f"Deleted the text of {secretreport.purge_quarantine(home)} quarantined observation(s)."
        where = self._where(fingerprint)
        if kind == "allow":
            secretreport.allow(home, fingerprint)
            return f"{where} is marked as not a secret: agents receive it again."
        secretreport.disallow(home, fingerprint)
        return f"{where} is withheld again."

    # -- showing ---------------------------------------------------------------------------------

    def show_report(self, report: secretreport.Report, done: str) -> None:
        self.report = report
        menu = self.query_one("#findings", Menu)
        keep = menu.highlighted
        menu.clear_options()
        menu.add_options([option(f"row:{i}", secretreport.line(row)) for i, row in enumerate(report.rows)])
        menu.display = bool(report.rows)
        summary = self.query_one("#summary", Text)
        if report.rows:
            allowed = len(report.rows) - len(report.withheld)
            summary.set(f"{len(report.withheld)} withheld, {allowed} allowed. A withheld section reaches no agent (a "
                        "placeholder is delivered instead); the Markdown file is not changed. Enter on a finding "
                        "marks it as not a secret, or withholds it again.")
            menu.highlighted = min(keep or 0, len(report.rows) - 1)
            menu.focus()
        else:
            summary.set(EMPTY)
        self.query_one("#quarantine", Text).set(
            f"{report.quarantined} quarantined observation(s) keep text that looked like a secret; p deletes it now "
            "(it is deleted after 7 days anyway)." if report.quarantined else
            "No quarantined observation keeps text that looked like a secret.")
        if done:
            self.notice.show(done, "ok")

    def _where(self, fingerprint: str) -> str:
        rows = [r for r in (self.report.rows if self.report else []) if r.fingerprint == fingerprint]
        if not rows:
            return f"fingerprint {fingerprint}"
        first = rows[0]
        more = f" (and {len(rows) - 1} more with the same value)" if len(rows) > 1 else ""
        return f"{first.target} {first.where}{more}"

    def _ask(self, action: tuple[str, str], question: str) -> None:
        self.pending = action
        self.notice.show(question + QUESTION, "ask")

    # -- keys ------------------------------------------------------------------------------------

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if self.report is None:
            return
        row = self.report.rows[int(str(event.option_id).split(":", 1)[1])]
        where = self._where(row.fingerprint)
        if row.allowed:
            self._ask(("disallow", row.fingerprint), f"Withhold {where} again ({row.rule})?")
        else:
            self._ask(("allow", row.fingerprint), f"Mark {where} ({row.rule}) as not a secret, so agents "
                                                  "receive it?")

    def action_ask_purge(self) -> None:
        count = self.report.quarantined if self.report else None
        if not count:
            self.pending = None
            self.notice.show("No quarantined observation keeps text that looked like a secret.", "ok")
            return
        self._ask(("purge", ""), f"Delete now the text of {count} quarantined observation(s) that looked like "
                                 "a secret?")

    def confirmed(self, pending: object) -> None:
        assert isinstance(pending, tuple)
        self._start(pending)
