"""Register the folder cm runs in as a project, in one confirmation (Home's offer).

Contract:
- Home offers it (``offer_label``) when ``projectaccess.folder_offer`` finds the folder cm runs in
  to be a project root that no registered project holds. When its repository is a project known
  from another machine (its memory file is here already), the offer names that match.
- The screen shows what Enter will save before anything is saved: the folder, the name, the project
  id and how it was chosen, the registry entry, and the two config keys (``projectaccess.KEYS``) its
  scope is added to — the same as ``cm project register PATH NAME --allow``.
- Enter on "Register …" runs ``projectaccess.register`` with the id shown (a generated one is kept)
  and allows the project's memory in the same save; Home then says what was saved. Esc, or the
  "Back" choice, saves nothing: config.json and the registry stay byte-identical.
- A failure (the folder vanished, a damaged registry, …) is shown in place as its code and message.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from cmrunner.core.errors import CmError
from cmrunner.manage import projectaccess
from cmrunner.tui.widgets import PRIORITY_PAGING, CmScreen, Menu, Text, error_text

_HOW = {
    "known": "the project known from another machine (its memory is here already): this folder's repository "
             "gives the same id, so registering it here shares that memory",
    "shared": "another registered folder holds the same repository: both share this id and one memory",
    "new": "derived from the repository's git remote: a clone on another machine gets the same id",
    "generated": "generated ({why}): another machine will not match it unless registered with --id",
}


def offer_label(found: projectaccess.FolderOffer) -> str:
    """Home's entry for ``found``: the folder's name and, for a known project, that it matches it."""
    if found.known_id:
        return f"Register this folder ({found.name}): it is project {found.known_id}, known from another machine"
    return f"Register this folder ({found.name}) as a project and allow its memory"


def plan_lines(found: projectaccess.Preview) -> list[str]:
    """What Enter saves, in the order it is saved."""
    project = found.project
    how = _HOW.get(found.how, found.how).format(why=found.why or "no git remote")
    lines = [f"Folder: {project.path}", f"Name: {project.name}", f"Project id: {project.id} — {how}", "",
             "Enter saves, in one step:",
             f"  runtime/projects.json: {project.path} → {project.scope}"]
    if not found.missing:
        lines.append(f"  config.json: nothing — {project.scope} is already in both "
                     f"{' and '.join(projectaccess.KEYS)}")
    for key in found.missing:
        what = ("cm may read this project's memory and send it to your model and agents"
                if key == projectaccess.KEYS[0] else "the Memory Agent may write this project's memory")
        lines.append(f"  config.json: {key} +{project.scope} ({what})")
    lines += ["", "Captures in this folder then go to this project's memory, not the global one. "
              "Esc saves nothing."]
    return lines


class RegisterScreen(CmScreen):
    TITLE_TEXT = "Projects · Register this folder"
    HINT = "↑↓ move · PgUp/PgDn scroll · Enter choose · Esc back"
    BINDINGS = PRIORITY_PAGING
    PAGE_TARGET = "#register-box"

    def __init__(self, found: projectaccess.Preview) -> None:
        super().__init__()
        self.found = found

    def body(self) -> ComposeResult:
        with VerticalScroll(id="register-box"):
            yield Text("\n".join(plan_lines(self.found)), id="register-plan")
        yield Menu([("register", f"Register {self.found.project.name} and allow its memory"),
                    ("back", "Back: register nothing")], id="choice")

    def on_mount(self) -> None:
        self.query_one("#choice", Menu).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id != "register":
            self.app.pop_screen()
            return
        project = self.found.project
        generated = project.id if self.found.how == "generated" else None
        try:
            done = projectaccess.register(self.app.home, project.path, project.name, True,  # type: ignore[attr-defined]
                                          generated=generated)
        except CmError as exc:
            self.notice.show(error_text(exc, "see `cm project list` for what is registered"))
            return
        saved = done.project
        allowed = (f"added to {' and '.join(done.granted)} (config.json)" if done.granted
                   else "its memory was allowed already")
        if done.missing:
            allowed = f"still not allowed: {' and '.join(done.missing)} lack it"
        self.app.pop_screen()
        self.app.screen.notice.show(  # type: ignore[attr-defined]  # Home, a CmScreen
            f"Registered {saved.name} as {saved.scope}; {allowed}.", "ok")
