"""The model form (Provider → Base URL → hidden API key → Model), shared by first run and Change Model.

Contract: nothing is written until a model is chosen and its endpoint passed ``endpoint.check``
(the model is listed, and it answered one test request with a tool call); then
``providers.commit_model`` commits the key and ``config.json`` recoverably and the flow's ``done``
decides what comes next (first run: the integration step; Change Model: back to management;
``cm config``: a closing screen). The model list is fetched when the Model step opens, for every
preset and Custom, in a worker thread, over the model's own outbound client, and the check runs in
one too. A wrong URL (``ENDPOINT_NOT_FOUND``: probably missing ``/v1``), a server that is down
(``MODEL_UNREACHABLE``) or a refused key is shown in place with Retry and Back (the URL); a list
the server cannot give (a 404 offers Back too) offers Retry and "type the name", and the check
then decides. A listed server's list ends with "Type another model name": a typed name the list
lacks is refused (``MODEL_NOT_LISTED``, naming listed ones) before anything is saved. A failed
check or Esc leaves the configuration as it was: Esc goes back a step, and on the first step (or
with ``q`` on any step) it asks before quitting, saying that nothing was saved. The key is typed into a password field
and never displayed; when one is configured, an empty field keeps it. Local presets (no key) skip the key
step and store ``providers.LOCAL_KEY``.

The Provider step also offers each agent CLI found on ``PATH`` (Claude Code, Codex, Gemini CLI;
the discovery ``cm agents`` uses) first: "Use … you already have (no API key)". Choosing one asks
for no key and goes to ``setup_cli.AgentCliScreen``, which runs the runtime's check and saves it.
A CLI that is not found is not offered: one disabled line names them with how to install one.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.errors import CmError
from cmrunner.manage import agentsetup, endpoint, providers
from cmrunner.tui.widgets import FormScreen, Menu, Text, error_text, option, plain


class ModelFlow:
    """What the form collected so far, and what happens after the commit."""

    def __init__(self, home: str, done: Callable[[bool], None]) -> None:
        """``done`` hears whether the commit changed the configuration (nothing is saved when not)."""
        self.home = home
        self.done = done
        self.preset = "openai"
        self.base_url = ""
        self.api_key: str | None = None
        try:
            self.configured = config_mod.load(home).remote or {}
        except CmError:
            self.configured = {}
        self.current = providers.network_remote(self.configured) or {}

    def existing_key(self) -> str | None:
        if not self.current:
            return None
        try:
            return envfile.get_secret(self.home, self.current["apiKeyEnv"])
        except CmError:
            return None

    def key_for_discovery(self) -> str:
        return self.api_key or self.existing_key() or ""


def cli_label(offer: agentsetup.Offer, version: str | None = None) -> str:
    return f"Use {offer.title}{' ' + version if version else ''} you already have (no API key)"


class ProviderScreen(FormScreen):
    TITLE_TEXT = "Model setup · 1/4 Provider"

    def __init__(self, flow: ModelFlow) -> None:
        super().__init__()
        self.flow = flow
        self.offers: list[agentsetup.Offer] = []

    def body(self) -> ComposeResult:
        self.offers = agentsetup.offers(self.app.discover())  # type: ignore[attr-defined]
        found = [o for o in self.offers if o.found]
        missing = [o for o in self.offers if not o.found]
        yield Text("Which provider runs your Memory Agent? The base URL is only a prefill you can edit.")
        menu = Menu([], id="providers")
        choices: list[Option] = [option(f"cli:{o.agent}", cli_label(o)) for o in found]
        if missing:  # beside the offers, so a short terminal shows it without scrolling
            names = ", ".join(f"{o.title} (npm install -g {agentsetup.PACKAGES[o.agent]})" for o in missing)
            choices.append(Option(plain(f"Not found on PATH: {names}; install one and log in once to use it "
                                        "without a key"), id="cli-missing", disabled=True))
        choices += [option(p.id, f"{p.label}  ({'Responses' if p.api == 'responses' else 'Chat Completions'}"
                                 f"{'' if p.needs_key else ', no key'})") for p in providers.PRESETS]
        menu.add_options(choices)
        yield menu

    def on_mount(self) -> None:
        menu = self.query_one("#providers", Menu)
        ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
        configured = self.flow.configured
        current = f"cli:{configured.get('agent')}" if configured.get("provider") == "agent-cli" \
            else self.flow.current.get("preset")
        menu.highlighted = ids.index(current) if current in ids else next(
            i for i in range(menu.option_count) if not menu.get_option_at_index(i).disabled)
        menu.focus()
        if any(o.found for o in self.offers):
            self.run_worker(self._versions, thread=True, exclusive=True)

    def _versions(self) -> None:
        found = agentsetup.versions(self.flow.home, [o for o in self.offers if o.found])
        self.app.call_from_thread(self._show_versions, found)

    def _show_versions(self, found: dict[str, str | None]) -> None:
        menu = self.query_one("#providers", Menu)
        for offer in self.offers:
            if found.get(offer.agent):
                menu.replace_option_prompt(f"cli:{offer.agent}", plain(cli_label(offer, found[offer.agent])))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        key = str(event.option_id)
        if key.startswith("cli:"):
            from cmrunner.tui.setup_cli import AgentCliScreen

            offer = next(o for o in self.offers if f"cli:{o.agent}" == key)
            self.app.push_screen(AgentCliScreen(self.flow.home, self.flow.done, offer))
            return
        self.flow.preset = key
        self.app.push_screen(BaseUrlScreen(self.flow))


class BaseUrlScreen(FormScreen):
    TITLE_TEXT = "Model setup · 2/4 Base URL"
    HINT = "Enter continue · Esc back"

    def __init__(self, flow: ModelFlow) -> None:
        super().__init__()
        self.flow = flow

    def body(self) -> ComposeResult:
        chosen = providers.preset(self.flow.preset)
        value = chosen.base_url
        if self.flow.current.get("preset") == chosen.id:
            value = self.flow.current.get("baseUrl", value)
        yield Text(f"{chosen.label}: the OpenAI-compatible base URL, usually ending in its API path such as /v1. "
                   "Before saving, cm checks it: the model list at <URL>/models, then one test request in which "
                   "the model must call a tool." + ("" if chosen.needs_key else " A local server needs no key."))
        yield Input(value=value, placeholder="https://host/v1", id="url")

    def on_mount(self) -> None:
        self.query_one("#url", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self.flow.base_url = providers.check_base_url(event.value)
        except CmError as exc:
            self.notice.show(exc.message)
            return
        if providers.preset(self.flow.preset).needs_key:
            self.app.push_screen(KeyScreen(self.flow))
        else:
            self.flow.api_key = providers.LOCAL_KEY
            self.app.push_screen(ModelScreen(self.flow))


class KeyScreen(FormScreen):
    TITLE_TEXT = "Model setup · 3/4 API key"
    HINT = "Enter continue · Esc back · the key is hidden and stored only in the private .env"

    def __init__(self, flow: ModelFlow) -> None:
        super().__init__()
        self.flow = flow

    def body(self) -> ComposeResult:
        keep = self.flow.existing_key() is not None
        yield Text("Paste the API key. It is saved only in the private .env (mode 0600), never in config.json"
                   + (" — leave empty to keep the current key." if keep else "."))
        yield Input(password=True, placeholder="(current key kept)" if keep else "API key", id="key")

    def on_mount(self) -> None:
        self.query_one("#key", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            if event.value.strip():
                self.flow.api_key = providers.check_api_key(event.value)
            elif self.flow.existing_key() is None:
                raise CmError("API_KEY_MISSING", "enter the API key")
            else:
                self.flow.api_key = None
        except CmError as exc:
            self.notice.show(exc.message)
            return
        self.app.push_screen(ModelScreen(self.flow))


class ModelScreen(FormScreen):
    TITLE_TEXT = "Model setup · 4/4 Model"

    def __init__(self, flow: ModelFlow) -> None:
        super().__init__()
        self.flow = flow
        self.models: list[str] = []

    def body(self) -> ComposeResult:
        yield Text("", id="status")
        yield Menu([], id="models")
        yield Input(placeholder="model name, e.g. gpt-5-mini", id="name")

    def on_mount(self) -> None:
        self.load()

    def load(self) -> None:
        self.query_one("#status", Text).set(f"Loading the model list from {self.flow.base_url}/models …")
        self.query_one("#models", Menu).display = False
        self.query_one("#name", Input).display = False
        self.notice.clear()
        self.run_worker(self._discover, thread=True, exclusive=True)

    def _discover(self) -> None:
        try:
            found: list[str] | CmError = providers.discover_models(self.flow.home, self.flow.base_url,
                                                                    self.flow.key_for_discovery())
        except CmError as exc:
            found = exc
        self.app.call_from_thread(self._loaded, found)

    def _loaded(self, found: list[str] | CmError) -> None:
        menu = self.query_one("#models", Menu)
        menu.clear_options()
        if isinstance(found, CmError):
            self.query_one("#status", Text).set("The model list could not be loaded.")
            self.notice.show(error_text(found))
            choices = [option("retry", "Retry")]
            if not found.code.startswith("MODEL_LIST_"):
                choices.append(option("back", "Back: change the base URL"))
            if found.code.startswith("MODEL_LIST_") or found.code == "ENDPOINT_NOT_FOUND":
                # some servers keep no list: the check's test request then says whether the URL is right
                choices.append(option("manual", "Type the model name"))
            menu.add_options(choices)
        else:
            self.models = found
            self.query_one("#status", Text).set(f"{len(found)} model{'' if len(found) == 1 else 's'} at "
                                                f"{self.flow.base_url}:")
            # a name typed here is checked against this list too (``MODEL_NOT_LISTED`` names the listed ones)
            menu.add_options([*(option(f"model:{i}", name) for i, name in enumerate(found)),
                              option("manual", "Type another model name")])
            current = self.flow.current.get("model")
            menu.highlighted = found.index(current) if current in found else 0
        if isinstance(found, CmError):
            menu.highlighted = 0
        menu.display = True
        menu.focus()

    def manual(self, why: str) -> None:
        self.query_one("#status", Text).set(why)
        self.query_one("#models", Menu).display = False
        field = self.query_one("#name", Input)
        field.display = True
        field.value = self.flow.current.get("model", "") if self.flow.current.get("preset") == self.flow.preset else ""
        field.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        key = str(event.option_id)
        if key == "retry":
            self.load()
        elif key == "back":
            while not isinstance(self.app.screen, BaseUrlScreen):  # past the key step, if there was one
                self.app.pop_screen()
        elif key == "manual":
            self.manual("Type the model name exactly as the provider expects it.")
        else:
            self.commit(self.models[int(key.split(":", 1)[1])])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.commit(event.value)

    def commit(self, model: str) -> None:
        try:
            choice = providers.ModelChoice(self.flow.preset, self.flow.base_url, providers.check_model_name(model))
            changed = providers.would_change(self.flow.home, choice, self.flow.api_key)
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        if not changed:
            self.flow.done(False)
            return
        self.notice.clear()
        self.query_one("#status", Text).set(f"Checking {choice.model} at {self.flow.base_url}: one test request "
                                            "with a tool call …")
        self.run_worker(lambda: self._check(choice), thread=True, exclusive=True)

    def _check(self, choice: providers.ModelChoice) -> None:
        remote = dict(providers.route_remote(self.flow.home, choice.base_url), model=choice.model, api=choice.api)
        try:
            endpoint.check(self.flow.home, remote, self.flow.key_for_discovery(), self.models or None)
            failed: CmError | None = None
        except CmError as exc:
            failed = exc
        self.app.call_from_thread(self._checked, choice, failed)

    def _checked(self, choice: providers.ModelChoice, failed: CmError | None) -> None:
        if failed is None:
            try:
                providers.commit_model(self.flow.home, choice, self.flow.api_key)
            except CmError as exc:
                failed = exc
        if failed is not None:
            self.query_one("#status", Text).set(f"{choice.model} was not saved; nothing changed.")
            self.notice.show(error_text(failed))
            return
        self.flow.done(True)
