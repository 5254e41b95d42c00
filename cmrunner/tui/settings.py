"""Model & Configuration: Current Configuration, network settings, the connection test, uninstall.

Contract:
- Current Configuration is ``confview.lines`` (no network, no SQLite, secrets concealed).
- Network settings save through ``netsettings.save``: everything is validated first and an error is
  shown in place with nothing written. The proxy URL field is a password field (it may hold
  credentials) and an empty field keeps a saved URL.
- The connection test runs ``nettest.run`` in a worker thread and shows the route and outcome; its
  success does not prove that the Writer can commit.
- Uninstall shows the plan and its blockers first, asks about Memory Data separately (kept by
  default), then asks for a final confirmation whose default is Cancel.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Input, OptionList

from cmrunner.core.errors import CmError
from cmrunner.manage import confview, netsettings, uninstall
from cmrunner.manage.integrations import discovery
from cmrunner.tui.widgets import CmScreen, Menu, Text, error_text, option


class ConfigScreen(CmScreen):
    TITLE_TEXT = "Model & Configuration · Current Configuration"
    HINT = "↑↓ PgUp PgDn scroll · Esc back"

    def body(self) -> ComposeResult:
        with VerticalScroll(id="scroll"):
            yield Text("\n".join(confview.lines(self.app.home)), id="config")  # type: ignore[attr-defined]

    def on_mount(self) -> None:
        self.query_one("#scroll").focus()


MODES = (("direct", "direct — the normal system route; proxy variables are ignored (recommended)"),
         ("env", "env — HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and NO_PROXY from the environment"),
         ("custom", "custom — an explicit HTTP(S) proxy with its own bypass list"))


class NetworkScreen(CmScreen):
    TITLE_TEXT = "Model & Configuration · Network Settings"
    HINT = "↑↓ mode · Tab next field · Enter save · Esc back"

    def __init__(self) -> None:
        super().__init__()
        self.mode = "direct"

    def body(self) -> ComposeResult:
        # compact widgets and the saved state first: the whole form fits 80×24 with room for an error
        yield Text("How model calls reach the provider (this changes nothing for your agents' own traffic):")
        yield Text("", id="current")
        yield Menu(MODES, id="mode", compact=True)
        yield Text("Custom proxy URL (stored privately; leave empty to keep the saved one):", classes="label")
        yield Input(password=True, placeholder="http://user:password@proxy:8080", id="proxy", compact=True)
        yield Text("Custom bypass list (hosts, .domain, *.domain, IPs, CIDRs, *):", classes="label")
        yield Input(placeholder="localhost, .internal.example", id="noproxy", compact=True)
        yield Text("Extra CA certificate file (absolute path to PEM, ≤ 1 MiB; empty for none):", classes="label")
        yield Input(placeholder="/path/to/ca.pem", id="cafile", compact=True)

    def on_mount(self) -> None:
        try:
            info = netsettings.describe(self.app.home)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        if not info["configured"]:
            self.notice.show("Choose a provider and model first (Change Model / Provider).")
            for widget in self.query(Input):
                widget.disabled = True
            return
        self.mode = info["mode"] if info["mode"] in netsettings.MODES else "direct"
        menu = self.query_one("#mode", Menu)
        menu.highlighted = [k for k, _ in MODES].index(self.mode)
        self.query_one("#noproxy", Input).value = info["noProxy"]
        self.query_one("#cafile", Input).value = info["caFile"] or ""
        self.show_current(info)
        menu.focus()

    def show_current(self, info: dict) -> None:
        line = f"Saved: mode {info['mode']}"
        if info.get("proxyUrlSet"):
            line += ", proxy URL set"
        if "route" in info:
            route = info["route"]
            via = "proxy " + route["proxy"] if route["via"] == "proxy" else "direct"
            line += f" · route: {via} ({route['reason']})"
        elif "routeError" in info:
            line += f" · route error: {info['routeError']}"
        self.query_one("#current", Text).set(line)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.mode = str(event.option_id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.mode = str(event.option_id)
        self.query_one("#proxy" if self.mode == "custom" else "#cafile", Input).focus()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.save()

    def save(self) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        proxy = self.query_one("#proxy", Input).value
        bypass = self.query_one("#noproxy", Input).value if self.mode == "custom" else ""
        try:
            netsettings.save(home, self.mode, proxy or None, bypass, self.query_one("#cafile", Input).value)
        except CmError as exc:
            self.notice.show(error_text(exc, "nothing was saved"))
            return
        self.query_one("#proxy", Input).value = ""
        from cmrunner.tui.home import restart_line

        self.notice.show("Saved. " + restart_line(home, "use the new route"), "ok")
        self.show_current(netsettings.describe(home))


class TestScreen(CmScreen):
    TITLE_TEXT = "Model & Configuration · Model Connection Test"
    HINT = "r run again · Esc back"
    BINDINGS = [Binding("r", "run", show=False)]

    def body(self) -> ComposeResult:
        yield Text("Sends one small synthetic request (no memory, no user text) over the configured route; "
                   "the usage ledger records it like every model request.")
        yield Text("", id="result")

    def on_mount(self) -> None:
        self.action_run()

    def action_run(self) -> None:
        self.query_one("#result", Text).set("Testing …")
        self.run_worker(self._test, thread=True, exclusive=True)

    def _test(self) -> None:
        from cmrunner.agentrt import nettest
        from cmrunner.core import config as config_mod

        try:
            report = nettest.run(config_mod.load(self.app.home))  # type: ignore[attr-defined]
            text = describe_test(report)
        except CmError as exc:
            text = error_text(exc)
        self.app.call_from_thread(self.query_one("#result", Text).set, text)


def describe_test(report: dict) -> str:
    if report.get("runtime") == "agent-cli":
        lines = [f"Model:   {report['model']} through the {report['agent']} CLI (its own login)",
                 f"CLI:     {report['binary']}, version {report['version'] or 'unknown'}"]
    else:
        lines = [f"Model:   {report['model']} at {report['baseUrl']} ({report['api']})"]
    route = report.get("route")
    if route:
        via = f"proxy {route['proxy']}" if route["via"] == "proxy" else "direct"
        lines.append(f"Route:   {via} (mode {route['mode']}: {route['reason']})")
    outcome = report["outcome"]
    if outcome["ok"]:
        proves = "the CLI starts confined and answers" if report.get("runtime") == "agent-cli" else \
            "the route, key and protocol"
        lines.append(f"Outcome: OK in {outcome['elapsedMs']} ms. This proves {proves}, not that the Writer can commit.")
    else:
        status = "".join(f", {k} {outcome[k]}" for k in ("httpStatus", "proxyStatus") if k in outcome)
        lines.append(f"Outcome: {outcome['code']} at {outcome['stage']} ({outcome['reason']}{status})")
    return "\n".join(lines)


class UninstallScreen(CmScreen):
    TITLE_TEXT = "Model & Configuration · Uninstall cm"
    HINT = "Enter continue · Esc cancel"

    def __init__(self) -> None:
        super().__init__()
        self.planned: uninstall.UninstallPlan | None = None

    def body(self) -> ComposeResult:
        with VerticalScroll():
            yield Text("", id="plan")
        yield Menu([], id="next")

    def on_mount(self) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        try:
            self.planned = uninstall.plan(home, self.app.discover())  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        p = self.planned
        lines = ["Complete uninstall removes:"]
        if p.integrations is not None:
            lines += [f"  integration: {discovery.TITLES[host]}" for host in p.integrations.remove] \
                or ["  no integration is installed"]
        lines += [f"  {path}" for path in p.config_files]
        lines.append(f"  the program: {p.program_note}" if p.program else f"  (the program stays: {p.program_note})")
        lines.append(f"Memory Data ({p.data_root}) is asked about separately and kept by default.")
        if p.blocked:
            lines += ["", "Uninstall cannot run:"] + [f"  • {b}" for b in p.blockers]
        self.query_one("#plan", Text).set("\n".join(lines))
        menu = self.query_one("#next", Menu)
        if p.blocked:
            menu.display = False
            self.notice.show("Nothing was removed.")
        else:
            menu.add_options([option("continue", "Continue"), option("cancel", "Cancel")])
            menu.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id == "cancel" or self.planned is None:
            if self.at_first_screen():  # `cm uninstall`: Cancel is the answer, not a question
                self.app.exit()
            else:
                self.app.pop_screen()
        else:
            self.app.push_screen(DataChoiceScreen(self.planned))


class DataChoiceScreen(CmScreen):
    TITLE_TEXT = "Uninstall · Memory Data"

    def __init__(self, planned: uninstall.UninstallPlan) -> None:
        super().__init__()
        self.planned = planned

    def body(self) -> ComposeResult:
        yield Text(f"Your Memory Data is in {self.planned.data_root}: the Markdown memory and the runtime database "
                   "(including requests not processed yet). Keep it unless you are sure.")
        yield Menu([("keep", "Keep Memory Data"), ("delete", "Delete Memory Data permanently")], id="data")

    def on_mount(self) -> None:
        self.query_one("#data", Menu).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.app.push_screen(ConfirmUninstallScreen(self.planned, event.option_id == "delete"))


class ConfirmUninstallScreen(CmScreen):
    TITLE_TEXT = "Uninstall · Confirm"
    BINDINGS = [Binding("enter", "back", show=False)]

    def __init__(self, planned: uninstall.UninstallPlan, remove_data: bool) -> None:
        super().__init__()
        self.planned = planned
        self.remove_data = remove_data

    def body(self) -> ComposeResult:
        data = "DELETED" if self.remove_data else "kept"
        yield Text(f"Remove cm's integrations and configuration now? Memory Data will be {data}.")
        items = [("cancel", "Cancel")]
        if self.planned.program:
            items.append(("all", "Uninstall and remove the cm program"))
        items.append(("keep-program", "Uninstall but keep the cm program"))
        yield Menu(items, id="confirm")
        yield Text("", id="result")

    def on_mount(self) -> None:
        self.query_one("#confirm", Menu).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id == "cancel":
            self.action_back()
            return
        try:
            done = uninstall.execute(self.app.home, self.planned, self.remove_data,  # type: ignore[attr-defined]
                                     event.option_id == "all")
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        self.query_one("#confirm", Menu).display = False
        self.query_one("#result", Text).set("\n".join(done) + "\n\nPress Enter or Esc to leave.")
        self.app.uninstalled = True  # type: ignore[attr-defined]

    def action_back(self) -> None:
        if getattr(self.app, "uninstalled", False):
            self.app.exit()
        else:
            super().action_back()
