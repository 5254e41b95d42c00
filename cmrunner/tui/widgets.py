"""Small building blocks shared by every screen of the management UI.

Contract: text from the user, the configuration or the file system is always shown literally
(``markup=False`` / ``Content``), so a path or a model name with brackets can never be read as
styling, and through ``plain``, the one place the UI turns text into something drawn: there
``textchars.for_terminal`` shows control characters, bidirectional overrides and line separators
visibly (``^[``, ``\\u202e``), so memory text can never act on the terminal or reorder the screen. ``CmScreen`` gives every screen the same frame — a title, a body and a key hint — and
the same Esc rule: back one level, and out of the program from the first screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cmrunner.core import textchars
from cmrunner.core.errors import CmError


def error_text(exc: CmError, consequence: str = "") -> str:
    """A controlled failure as a screen shows it: code, message, and what did not happen."""
    return f"{exc.code}: {exc.message}" + (f" ({consequence})" if consequence else "")


def plain(text: str) -> Content:
    return Content(textchars.for_terminal(text))


def option(key: str, label: str) -> Option:
    """A menu entry shown literally."""
    return Option(plain(label), id=key)


class Text(Static):
    """A literal text block (never markup)."""

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(plain(text), markup=False, id=id, classes=classes)

    def set(self, text: str) -> None:
        self.update(plain(text))


class Notice(Text):
    """The in-place message line: an error (``error``) or a confirmation (``ok``)."""

    def show(self, text: str, kind: str = "error") -> None:
        self.remove_class("error", "ok")
        self.add_class(kind)
        self.set(text)

    def clear(self) -> None:
        self.remove_class("error", "ok")
        self.set("")


class Menu(OptionList):
    """A vertical list of actions: arrows move, Enter opens."""

    def __init__(self, items: Iterable[tuple[str, str]], *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(*[option(key, label) for key, label in items], id=id, classes=classes,
                         markup=False)

    def add_options(self, items: Iterable) -> Menu:  # type: ignore[override]
        super().add_options(items)
        if self.highlighted is None and self.option_count:
            self.highlighted = 0  # Enter always has something to open
        return self


@dataclass
class _Choice:
    key: str
    label: str
    checked: bool
    disabled: bool


class CheckList(OptionList):
    """Checkboxes shown as ``[x]``/``[ ]``: Space toggles the highlighted one, Enter continues."""

    BINDINGS = [Binding("space", "toggle_item", "Toggle", show=False), Binding("enter", "continue", "Continue", show=False)]

    class Continued(Message):
        def __init__(self, selected: list[str]) -> None:
            super().__init__()
            self.selected = selected

    def __init__(self, items: Iterable[tuple[str, str, bool, bool]], *, id: str | None = None) -> None:
        """``items`` are ``(key, label, checked, disabled)``."""
        self._items = [_Choice(*item) for item in items]
        super().__init__(*[Option(self._prompt(i), id=i.key, disabled=i.disabled) for i in self._items], id=id,
                         markup=False)

    @staticmethod
    def _prompt(item: _Choice) -> Content:
        return plain(("[x] " if item.checked else "[ ] ") + item.label)

    @property
    def selected(self) -> list[str]:
        return [item.key for item in self._items if item.checked]

    def action_toggle_item(self) -> None:
        index = self.highlighted
        if index is None or self._items[index].disabled:
            return
        self._items[index].checked = not self._items[index].checked
        self.replace_option_prompt_at_index(index, self._prompt(self._items[index]))

    def action_continue(self) -> None:
        self.post_message(self.Continued(self.selected))


HELP = ("Keys everywhere: Esc back one level (it quits from the first screen) · q quit cm · ? this help · "
        "Ctrl+C quit. Typing in a field types; these keys work outside one.")


class CmScreen(Screen):
    """Title, body, key hint; Esc goes back one level (and quits from the first screen), ``q``
    quits, ``?`` shows the keys. A screen holding something unsent (``leaving_loses``) warns once
    before Esc or ``q`` would discard it."""

    BINDINGS = [Binding("escape", "back", "Back", show=False), Binding("q", "quit_cm", show=False),
                Binding("question_mark", "help", show=False)]
    TITLE_TEXT = "cm"
    HINT = "↑↓ move · Enter choose · Esc back"
    _warned = False

    def leaving_loses(self) -> str | None:
        """What leaving now would discard, said as a warning; ``None`` when nothing would be lost."""
        return None

    def may_leave(self) -> bool:
        """Whether Esc or ``q`` may leave now: the first attempt that would lose something only warns."""
        lost = self.leaving_loses()
        if lost is None or self._warned:
            return True
        self._warned = True
        self.notice.show(lost)
        return False

    def action_quit_cm(self) -> None:
        if self.may_leave():
            self.app.exit()

    def action_help(self) -> None:
        self.notice.show(f"{HELP} This screen: {self.HINT}.", "ok")

    def compose(self) -> ComposeResult:
        yield Text(self.TITLE_TEXT, id="title")
        yield from self.body()
        yield Notice(id="notice")
        yield Text(self.HINT, id="hint")

    def body(self) -> ComposeResult:
        yield from ()

    @property
    def notice(self) -> Notice:
        return self.query_one("#notice", Notice)

    def action_back(self) -> None:
        if not self.may_leave():
            return
        if len(self.app.screen_stack) <= 2:
            self.app.exit()
        else:
            self.app.pop_screen()


class ConfirmingScreen(CmScreen):
    """A screen that asks one y/n question at a time in its notice line: ``y`` runs ``confirmed``
    with what was asked about, ``n`` or Esc cancels ("Nothing was changed."), and Esc leaves only
    when no question is open."""

    BINDINGS = [Binding("y", "confirm", show=False), Binding("n", "cancel", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.pending: object | None = None

    def confirmed(self, pending: object) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def action_confirm(self) -> None:
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        self.notice.clear()
        self.confirmed(pending)

    def action_cancel(self) -> None:
        if self.pending is not None:
            self.pending = None
            self.notice.show("Nothing was changed.", "ok")

    def action_back(self) -> None:
        if self.pending is not None:
            self.action_cancel()
        else:
            super().action_back()
