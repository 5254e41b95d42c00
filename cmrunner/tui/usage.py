"""Model & Configuration · Usage & Spend Caps: what cm sent, a bar per day, and the caps to edit.

Contract:
- The report is ``cmrunner.views.usage`` (the same words as ``cm usage``: read-only, counts only),
  with the last ``CHART_DAYS`` days as text bars of tokens.
- The three caps are edited in place, parsed by ``spend.parse_cap`` and saved through
  ``spendcaps.set_caps`` (the same path as ``cm usage caps``): a whole number, 0 (the Memory Agent
  off) or empty (no cap); anything else is shown in place with nothing written. Saving starts a drain, so work a raised cap releases goes on.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input

from cmrunner.core import config as config_mod, spend
from cmrunner.core.errors import CmError
from cmrunner.manage import spendcaps
from cmrunner.tui.widgets import CmScreen, Text, error_text
from cmrunner.views import usage

FIELDS = (("tokensPerDay", "Tokens per day (UTC)"), ("tokensPerMonth", "Tokens per month (UTC)"),
          ("requestsPerHour", "Requests per hour"))


class UsageScreen(CmScreen):
    TITLE_TEXT = "Model & Configuration · Usage & Spend Caps"
    HINT = "Tab next field · Enter save caps · PgUp/PgDn scroll · Esc back"

    def body(self) -> ComposeResult:
        with VerticalScroll(id="scroll"):
            yield Text("", id="report")
            yield Text("", id="chart")
            yield Text("Spend caps (empty: no cap; 0 turns the Memory Agent off):", classes="label")
            with Horizontal(id="caps"):
                for key, label in FIELDS:
                    with Vertical(classes="cap"):
                        yield Text(label)
                        yield Input(id=key)
            yield Text("", id="grants")

    def on_mount(self) -> None:
        self.refresh_report()
        home = self.app.home  # type: ignore[attr-defined]
        try:
            caps = config_mod.load(home).spend
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        for key, _label in FIELDS:
            self.query_one(f"#{key}", Input).value = "" if caps[key] is None else str(caps[key])
        self.query_one(f"#{FIELDS[0][0]}", Input).focus()

    def refresh_report(self) -> None:
        try:
            report = usage.gather(self.app.home)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        top = [f"Today (UTC):  {usage.totals_text(report['today'])}",
               f"This month:   {usage.totals_text(report['month'])}"]
        if report["blocked"]:
            top.append(f"WAITING: {report['blocked']['message']}")
        self.query_one("#report", Text).set("\n".join(top))
        chart = [f"Tokens per day, last {usage.CHART_DAYS} days ({usage.chart(report['daily'])[0]}):"]
        self.query_one("#chart", Text).set("\n".join(chart + usage.chart(report["daily"])[1:]))
        grants = [f"  {usage.grant_label(g)}: {usage.totals_text(g)}" for g in report["byGrant"]]
        if grants:
            grants.insert(0, "What left this machine, by scope and provenance class:")
        self.query_one("#grants", Text).set("\n".join(grants))

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        try:
            changes = {key: spend.parse_cap(key, self.query_one(f"#{key}", Input).value) for key, _label in FIELDS}
            spendcaps.set_caps(home, changes)
        except CmError as exc:
            self.notice.show(error_text(exc, "nothing was saved"))
            return
        self.notice.show("Saved. Work a raised cap held back goes on now.", "ok")
        self.refresh_report()
