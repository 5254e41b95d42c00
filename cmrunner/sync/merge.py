"""The three-way merge of one memory document, by section, never by line.

Contract:
- The unit is what the one section grammar (``core/sections.py`` over ``core/mdscan.py``) calls a
  unit: the head (H1, front matter, comments), the untitled text before the first section, and each
  ``## title`` section, named by its title (and occurrence, for a title a hand edit repeated).
- For each unit, with ``base`` the merge base's text, ``ours`` this machine's and ``theirs`` the
  remote's (``None``: absent): the same on both sides → kept; changed on one side only → that
  side's (an addition, an edit or a removal); changed on both sides to different texts → a
  conflict: the remote's text stays in place (it is what the other machines already have, so
  every machine converges on it) and ours is returned in ``conflicts`` for the trash. A unit
  removed on one side and edited on the other keeps the edit: an edit is never dropped.
- Order: ours's order, with units only the remote has placed after the unit that precedes them
  there. The result is parsed again: it always reads as a valid document, and never holds a
  conflict marker (nothing here writes one).
- A side that does not parse is ``SYNC_DOCUMENT_UNREADABLE`` (the file, line and rule; nothing is
  merged): the user fixes it with ``cm fix``.
"""

from __future__ import annotations

from typing import NamedTuple

from cmrunner.core import sections
from cmrunner.core.errors import CmError

_HEAD = "\0head"


class Conflict(NamedTuple):
    key: str  # the history key ``<target>:<digest>``
    title: str
    ours: str
    theirs: str


class Merged(NamedTuple):
    data: bytes | None  # None: the document is absent on the result
    conflicts: list[Conflict]


def _units(target: str, data: bytes | None, side: str) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """(order of keys, {key: (title, text)}) of one side; the head is a unit of its own."""
    if data is None:
        return [], {}
    try:
        doc = sections.parse(target, data)
    except CmError as exc:
        raise CmError("SYNC_DOCUMENT_UNREADABLE", f"{side} copy of {target} cannot be read as memory "
                                                  f"({exc.code}); run `cm fix {target}`, then `cm sync`") from None
    order = [_HEAD]
    found = {_HEAD: ("", doc.data[:doc.head_end].decode("utf-8"))}
    for unit in doc.sections:
        key = sections.unit_key(target, unit)
        order.append(key)
        # Blank lines after a unit separate it from the next one: they are not its content, so
        # a section that became the last one (or stopped being it) has not changed.
        found[key] = (unit.title, doc.data[unit.start:unit.end].decode("utf-8").rstrip("\r\n") + "\n")
    return order, found


def merge(target: str, base: bytes | None, ours: bytes | None, theirs: bytes | None) -> Merged:
    """The merged document (module contract)."""
    if ours == theirs:
        return Merged(ours, [])
    if base == ours:
        return Merged(theirs, [])
    if base == theirs:
        return Merged(ours, [])
    _, b = _units(target, base, "the common")
    our_order, o = _units(target, ours, "this machine's")
    their_order, t = _units(target, theirs, "the remote's")
    kept: dict[str, str] = {}
    conflicts: list[Conflict] = []
    for key in dict.fromkeys(our_order + their_order):
        bt, ot, tt = (b.get(key, (None, None))[1], o.get(key, (None, None))[1], t.get(key, (None, None))[1])
        if ot == tt or bt == tt:
            text = ot
        elif bt == ot:
            text = tt
        elif ot is None or tt is None:
            text = ot if tt is None else tt  # removed on one side, edited on the other: the edit stays
        else:
            text = tt
            if key != _HEAD:
                conflicts.append(Conflict(key, o[key][0], ot, tt))
        if text is not None:
            kept[key] = text
    order = [k for k in our_order if k in kept]
    for i, key in enumerate(their_order):
        if key in kept and key not in order:
            before = next((k for k in reversed(their_order[:i]) if k in order), None)
            order.insert(order.index(before) + 1 if before is not None else 0, key)
    data = _join(order, kept)
    try:
        sections.parse(target, data)
    except CmError as exc:
        raise CmError("SYNC_DOCUMENT_UNREADABLE", f"the merge of {target} does not read as memory ({exc.code}); "
                                                  "run `cm sync repair`") from None
    return Merged(data, conflicts)


def _join(order: list[str], kept: dict[str, str]) -> bytes:
    """The units in ``order`` as one document: the head first, and a unit that was last on its
    side gets the blank line that separates sections."""
    if _HEAD in order:
        order = [_HEAD] + [k for k in order if k != _HEAD]
    parts = []
    for k in order:
        text = kept[k]
        if text and k != order[-1] and k != _HEAD:
            text += "\n" if text.endswith("\n") and not text.endswith("\n\n") else ""
            text += "" if text.endswith("\n") else "\n\n"
        parts.append(text)
    return "".join(parts).encode("utf-8")


class Held(NamedTuple):
    """A unit that stays on this machine (a secret): its key, the key before it, its text."""

    key: str
    after: str | None
    text: str


def split(target: str, data: bytes, flagged: set[int]) -> tuple[bytes, list[Held]]:
    """``data`` without the units the secret net flagged, and those units. ``flagged`` holds unit
    indexes of ``secrets/withhold.py``'s cut: 0 is everything before the first section (here the
    head and the untitled text), n the n-th section. The head is replaced by a plain H1."""
    order, units = _units(target, data, "this machine's")
    titled = [k for k in order if k != _HEAD and units[k][0] != ""]
    untitled = [k for k in order if k != _HEAD and units[k][0] == ""]
    if any(i > len(titled) for i in flagged):  # the two cuts disagree: keep the whole document here
        held_keys = set(order)
    else:
        held_keys = {titled[i - 1] for i in flagged if i >= 1}
        if 0 in flagged:
            held_keys |= {_HEAD, *untitled}
    held = [Held(k, order[i - 1] if i else None, units[k][1]) for i, k in enumerate(order) if k in held_keys]
    kept = {k: units[k][1] for k in order if k not in held_keys}
    if _HEAD in held_keys:
        kept[_HEAD] = sections.missing_document_text(target)
    shown = [k for k in order if k in kept]
    return _join(shown, kept), held


def rejoin(target: str, data: bytes, held: list[Held]) -> bytes:
    """``data`` with the units ``split`` held back put back: in place of a unit of the same key, else
    after the unit that preceded it, else after the head."""
    order, units = _units(target, data, "the merged")
    kept = {k: text for k, (_title, text) in units.items()}
    for unit in held:
        if unit.key not in kept:
            at = order.index(unit.after) + 1 if unit.after in order else (1 if order and order[0] == _HEAD else 0)
            order.insert(at, unit.key)
        kept[unit.key] = unit.text
    return _join(order, kept)
