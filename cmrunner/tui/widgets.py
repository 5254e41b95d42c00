"""Small building blocks shared by every screen of the management UI.

Contract: text from the user, the configuration or the file system is always shown literally
(``markup=False`` / ``Content``), so a path or a model name with brackets can never be read as
styling, and through ``plain``, the one place the UI turns text into something drawn: there
``textchars.for_terminal`` shows control characters, bidirectional overrides and line separators
visibly (``^[``, ``\\u202e``), so memory text can never act on the terminal or reorder the screen. ``CmScreen`` gives every screen the same frame — a title, a body and a footer (notice line and
key hint, which always ends with ``q quit · ? help``) — and the same keys: Esc back one level (on the
first screen of a run it asks before quitting), ``q`` asks before quitting except where leaving is the
screen's purpose.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
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
        self.display = bool(text)

    def clear(self) -> None:
        self.remove_class("error", "ok")
        self.set("")
        self.display = False  # an empty notice takes no line from the body


class Menu(OptionList):
    """A vertical list of actions: arrows move, Enter opens."""

    def __init__(self, items: Iterable[tuple[str, str]], *, id: str | None = None,
                 classes: str | None = None, compact: bool = False) -> None:
        super().__init__(*[option(key, label) for key, label in items], id=id, classes=classes,
                         markup=False, compact=compact)

    def add_options(self, items: Iterable) -> Menu:  # type: ignore[override]
        super().add_options(items)
        if self.highlighted is None and self.option_count:
            self.highlighted = 0  # Enter always has something to open
        return self

    def _top_whole(self) -> None:
        """On the first enabled option, show the list from its top: a disabled line above it (an
        explanation, such as the agent CLIs not found) is then whole, never cut in half."""
        first = next((i for i in range(self.option_count) if not self.get_option_at_index(i).disabled), None)
        if self.highlighted is not None and self.highlighted == first:
            self.scroll_home(animate=False)

    def action_page_up(self) -> None:
        super().action_page_up()
        if self.highlighted is None and self.option_count:
            self.action_first()  # textual's page up onto a disabled first line highlights nothing
        self._top_whole()

    def action_page_down(self) -> None:
        super().action_page_down()
        if self.highlighted is None and self.option_count:
            self.action_last()

    def action_cursor_up(self) -> None:
        super().action_cursor_up()
        self._top_whole()

    def action_first(self) -> None:
        super().action_first()
        self._top_whole()


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


HELP = ("Keys everywhere: Esc back one level · q quit cm (asks first, except on Home) · ? this help · "
        "Ctrl+C quit at once. Typing in a field types; these keys work outside one.")
KEYS = "q quit · ? help"  # every footer ends with these, after the screen's own keys (its Esc among them)


class CmScreen(Screen):
    """Title, body, then a footer (the notice line and the key hint) docked at the bottom, so an
    error or a question is never below the fold. Esc goes back one level; on the first screen of a
    run it asks before quitting, as ``q`` does everywhere but on screens whose purpose is to be left
    (``ASKS_BEFORE_QUIT = False``: Home, an error, a closing message). ``?`` shows the keys. A
    screen holding something unsent (``leaving_loses``) warns once before Esc or ``q`` would discard it."""

    BINDINGS = [Binding("escape", "back", "Back", show=False), Binding("q", "quit_cm", show=False),
                Binding("question_mark", "help", show=False),
                # a list or a scrolling box with focus pages itself; otherwise the screen scrolls
                Binding("pagedown", "page(1)", show=False), Binding("pageup", "page(-1)", show=False)]
    TITLE_TEXT = "cm"
    HINT = "↑↓ move · Enter choose · Esc back"
    ASKS_BEFORE_QUIT = True
    PAGE_TARGET: str | None = None
    _warned = False
    _asked: str | None = None  # the key ("q" or "escape") whose second press quits

    def leaving_loses(self) -> str | None:
        """What leaving now would discard, said as a warning; ``None`` when nothing would be lost."""
        return None

    def quit_question(self) -> str:
        """The question ``q`` (or Esc on a first screen) asks; a setup step says what is kept."""
        return "Quit cm?"

    def may_leave(self) -> bool:
        """Whether Esc or ``q`` may leave now: the first attempt that would lose something only warns."""
        lost = self.leaving_loses()
        if lost is None or self._warned:
            return True
        self._warned = True
        self.notice.show(lost)
        return False

    def may_quit(self, key: str) -> bool:
        """Whether pressing ``key`` quits cm now: the first press asks (or warns about what would be
        lost), a second press of the same key confirms; any other key withdraws the question."""
        if self._asked == key:
            return True
        lost = self.leaving_loses()
        if lost is None and not self.ASKS_BEFORE_QUIT:
            return True
        self._asked = key
        name = "q" if key == "q" else "Esc"
        self.notice.show(lost or f"{self.quit_question()} Press {name} again to quit; any other key stays here.")
        return False

    def on_key(self, event: events.Key) -> None:
        if self._asked is not None and event.key != self._asked:
            self._asked = None
            self.notice.clear()

    def action_quit_cm(self) -> None:
        if self.may_quit("q"):
            self.app.exit()

    def action_page(self, pages: int) -> None:
        """PgDn/PgUp: the screen's ``PAGE_TARGET`` box when it has one (bound with priority there,
        since its list's own paging moves a highlight over two or five items), else the screen."""
        target = self.query_one(self.PAGE_TARGET) if self.PAGE_TARGET else self
        if pages > 0:
            target.scroll_page_down(animate=False)
        else:
            target.scroll_page_up(animate=False)

    def action_help(self) -> None:
        self.notice.show(f"{HELP} This screen: {self.HINT}.", "ok")

    def footer(self) -> str:
        return f"{self.HINT} · {KEYS}"

    def set_hint(self, hint: str) -> None:
        """Change this screen's own keys (the shared ones stay in the footer)."""
        self.HINT = hint
        self.query_one("#hint", Text).set(self.footer())

    def compose(self) -> ComposeResult:
        yield Text(self.TITLE_TEXT, id="title")
        yield from self.body()
        with Vertical(id="footer"):
            yield Notice(id="notice")
            yield Text(self.footer(), id="hint")

    def body(self) -> ComposeResult:
        yield from ()

    @property
    def notice(self) -> Notice:
        return self.query_one("#notice", Notice)

    def at_first_screen(self) -> bool:
        return len(self.app.screen_stack) <= 2

    def action_back(self) -> None:
        if self.at_first_screen():
            if self.may_quit("escape"):
                self.app.exit()
            return
        if not self.may_leave():
            return
        self.app.pop_screen()


class FormScreen(CmScreen):
    """A step of a form that saves only at its end (the model form): quitting or backing out of it
    keeps the configuration as it was, and its question says so."""

    def quit_question(self) -> str:
        return "Quit cm? Nothing of this form is saved: the model configuration stays as it was."


PRIORITY_PAGING: list[BindingType] = [Binding("pagedown", "page(1)", show=False, priority=True),
                                     Binding("pageup", "page(-1)", show=False, priority=True)]


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
