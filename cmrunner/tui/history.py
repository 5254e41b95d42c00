"""Memory Control · History and Trash: versions with their diffs, undo, restore.

Contract:
- History lists every version newest first in the form of ``cm history`` (``views.history``); the
  highlighted one's diff is shown below the list (withheld text stays withheld). ``u`` asks, on one
  line, to undo it (``writer_proc.undo``: a new commit, never a model call); ``y`` confirms, ``n``
  or Esc cancels (Esc leaves only when no question is open). A section changed since is refused
  with the diff shown, as ``cm undo`` does, and the screen then asks whether to undo anyway (its
  own ``y``, the CLI's ``--force``).
  ``w`` shows, in place of the diff, why that section says what it says (``views.why``, as
  ``cm why``: its commits and the words that were its evidence), for a removed version too, and
  scrolls it into view. The diff or the why sits in its own box below the list (at most 45% of the
  screen): PgUp/PgDn scroll it whatever has focus, so at 80×24 a long one is read whole while ↑↓
  keep picking versions.
- Trash lists what the Memory Agent removed (``views.history.trash``); Enter asks to restore the
  highlighted entry (``writer_proc.restore``), ``x`` to purge it for good (``writer_proc.purge``).
- The work runs off the UI thread (an action may wait for a running drain); a ``CmError`` is shown
  in the notice line with ``widgets.error_text`` and nothing else changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from cmrunner.core.errors import CmError
from cmrunner.tui.widgets import PRIORITY_PAGING, ConfirmingScreen, Menu, Text, error_text, option
from cmrunner.views import history as history_view

QUESTION = " y yes · n no"


class _ActionScreen(ConfirmingScreen):
    """A list read from the store, one confirmed action at a time, re-read after it."""

    LIST_ID = "items"
    BINDINGS = PRIORITY_PAGING  # ↑↓ pick a version; PgUp/PgDn read its diff or why, however long
    PAGE_TARGET = "#detail-box"

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict] = []

    def body(self) -> ComposeResult:
        yield Text("Reading …", id="summary")
        yield Menu([], id=self.LIST_ID, classes="versions")
        with VerticalScroll(id="detail-box"):  # a diff or a why runs long: it scrolls here, at 80×24 too
            yield Text("", id="detail")

    def on_mount(self) -> None:
        self._start(None)

    def read(self, home: str) -> list[dict]:  # pragma: no cover - interface
        raise NotImplementedError

    def label(self, item: dict) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def _start(self, action: Callable[[str], str] | None) -> None:
        self.run_worker(functools.partial(self._work, action), thread=True, exclusive=True)

    def _work(self, action: Callable[[str], str] | None) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        done = ""
        try:
            if action is not None:
                done = action(home)
            items = self.read(home)
        except CmError as exc:
            self.app.call_from_thread(self.refused, exc, action is not None)
            return
        self.app.call_from_thread(self.show_items, items, done)

    def refused(self, exc: CmError, acted: bool) -> None:
        """A failed read or action: the code and message in the notice line, a diff below."""
        self.notice.show(error_text(exc, "nothing was changed" if acted else ""))
        detail = getattr(exc, "diff", "")
        if detail:
            self.query_one("#detail", Text).set(detail.rstrip("\n"))

    def show_items(self, items: list[dict], done: str) -> None:
        self.items = items
        menu = self.query_one(f"#{self.LIST_ID}", Menu)
        menu.clear_options()
        menu.add_options([option(str(i), self.label(item)) for i, item in enumerate(items)])
        self.query_one("#summary", Text).set(self.summary(items))
        if done:
            self.notice.show(done, "ok")
        menu.focus()

    def summary(self, items: list[dict]) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def ask(self, question: str, action: Callable[[str], str]) -> None:
        self.pending = action
        self.notice.show(question + QUESTION, "ok")

    def confirmed(self, pending: object) -> None:
        assert callable(pending)
        self._start(pending)

    def highlighted(self) -> dict | None:
        index = self.query_one(f"#{self.LIST_ID}", Menu).highlighted
        return self.items[index] if index is not None and index < len(self.items) else None


def _undo(ref: str, home: str, force: bool = False) -> str:
    from cmrunner.writer_proc import undo

    done = undo.run(history_view.data_paths(home), home, ref, force)
    return f"Undid {', '.join(v for v, _t, _s in done.sections)} (receipt {done.receipt_id})."


def _purge(trash_id: str, home: str) -> str:
    from cmrunner.writer_proc import purge

    done = purge.run(history_view.data_paths(home), home, trash_id)
    return f"Purged {done.target}: {done.versions} version(s) lost their text; nothing of it is left."


def _restore(trash_id: str, home: str) -> str:
    from cmrunner.writer_proc import restore

    done = restore.run(history_view.data_paths(home), home, trash_id)
    return f"Restored {done.target} / {done.title}: agents receive it again."


class HistoryScreen(_ActionScreen):
    TITLE_TEXT = "Memory Control · History"
    HINT = "↑↓ move · u undo the highlighted version · w why is this section here · Esc back"
    BINDINGS = [Binding("u", "ask_undo", show=False), Binding("w", "why", show=False)]
    LIST_ID = "versions"
    undoing: dict | None = None  # the version the last undo question was about

    def read(self, home: str) -> list[dict]:
        return history_view.versions(home)

    def label(self, item: dict) -> str:
        return history_view.version_line(item, where=False)

    def summary(self, items: list[dict]) -> str:
        return f"{len(items)} version(s), newest first:" if items else \
            "No history yet: it is recorded from the first commit that changes a document."

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        item = self.highlighted()
        self.query_one("#detail", Text).set(history_view.version_detail(item) if item else "")

    def action_why(self) -> None:
        item = self.highlighted()
        if item is not None:
            self.run_worker(functools.partial(self._why, item), thread=True, exclusive=True)

    def _why(self, item: dict) -> None:
        from cmrunner.views import why

        try:
            found = why.explain(self.app.home, item["target"], item["ref"])  # type: ignore[attr-defined]
        except CmError as exc:
            self.app.call_from_thread(self.notice.show, error_text(exc))
            return
        self.app.call_from_thread(self._show_why, "\n".join(why.lines(found)).rstrip("\n"))

    def _show_why(self, text: str) -> None:
        """The answer in place of the diff, scrolled into view (at 80×24 it starts below the list)."""
        detail = self.query_one("#detail", Text)
        detail.set(text)
        self.query_one("#detail-box", VerticalScroll).scroll_home(animate=False)
        detail.scroll_visible(animate=False)

    def action_ask_undo(self) -> None:
        item = self.highlighted()
        if item is not None:
            self.undoing = item
            self.ask(f"Undo {item['id']} ({item['target']} / {item['section']})?", functools.partial(_undo, item["id"]))

    def refused(self, exc: CmError, acted: bool) -> None:
        """An undo refused because the section changed since: the diff below, and this screen's own
        way on (``y`` undoes anyway) instead of the CLI's ``--force``."""
        item = self.undoing
        if exc.code != "SECTION_CHANGED_SINCE" or item is None:
            super().refused(exc, acted)
            return
        self.query_one("#detail", Text).set(getattr(exc, "diff", "").rstrip("\n"))
        self.ask(f"{item['target']} / {item['section']} changed since {item['id']} wrote it (the diff from then to "
                 "now is below); nothing was changed. Undo anyway, replacing what is there now?",
                 functools.partial(_undo, item["id"], force=True))


class TrashScreen(_ActionScreen):
    TITLE_TEXT = "Memory Control · Trash"
    HINT = "↑↓ move · Enter restore · x purge for good · Esc back"
    BINDINGS = [Binding("x", "ask_purge", show=False)]
    LIST_ID = "trash"

    def read(self, home: str) -> list[dict]:
        return history_view.trash(home)

    def label(self, item: dict) -> str:
        return history_view.trash_line(item, where=False)

    def summary(self, items: list[dict]) -> str:
        return f"{len(items)} removed section(s):" if items else "The trash is empty."

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        item = self.items[int(str(event.option_id))]
        self.ask(f"Restore {item['target']} / {item['section']}?", functools.partial(_restore, item["id"]))

    def action_ask_purge(self) -> None:
        item = self.highlighted()
        if item is not None:
            self.ask(f"Destroy {item['target']} / {item['section']} for good? It cannot be undone.",
                     functools.partial(_purge, item["id"]))
