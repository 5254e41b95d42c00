"""What Gemini CLI's own chat record says about a prompt: typed by the user, or a command's expansion.

Gemini CLI reports a custom slash command to its hooks as the command's *expanded* prompt
(BeforeAgent ``prompt``: ``"Answer with one word. Topic: x"`` for ``/note x``, observed on 0.61.0),
and in ``-p`` it prepends the SessionStart context to the prompt inside ``<hook_context>`` tags.
The payload alone cannot tell an expansion from typed words, so this is the one place cm reads
Gemini's transcript (``transcript_path``, JSONL; a user record holds ``content`` and, for an
expansion, the typed ``displayContent``).

Contract:
- ``typed_part(text)`` cuts the ``<hook_context>…</hook_context>`` blocks in front of the typed
  words. Gemini 0.61 joins every hook's SessionStart context with newlines inside one block and
  escapes ``<`` and ``>`` in it (so the first closing tag ends it); a release that wraps each hook's
  block separately is handled the same way, block after block. It fails closed with ``None`` when
  the typed part cannot be told apart: an unclosed block, a raw ``<`` or ``>`` inside a block (not
  Gemini's own framing), or a tag left in the remainder. Stdlib only and import-light: the hook
  calls it. ``strip_escaped`` removes cm's own block, as Gemini quotes it, from a prompt kept aside.
- In the chat record, a BeforeAgent hook's added context is a separate part after the prompt
  (observed on 0.61.0); such a part is not typed text and is left out before comparing.
- ``verdict(path, digest)`` (drain only) reads the tail of the transcript (a regular file, no
  symlink, at most ``TAIL_BYTES`` from the end) and finds the newest user record whose typed part
  has that sha256 digest: ``None`` when it was typed (no ``displayContent``, or the same text),
  ``COMMAND_EXPANSION`` when the record shows other typed words (a command), and
  ``UNCONFIRMED_PROMPT`` when no readable record matches. It fails closed: an unreadable file, a
  line that is not JSON or a record of another shape never confirms anything.
"""

from __future__ import annotations

import os
import stat

from cmrunner.core.sha import sha256

OPENING, CLOSING = "<hook_context>", "</hook_context>"
TAIL_BYTES = 4 << 20


def typed_part(text: str) -> str | None:
    """The prompt without the hook-context blocks Gemini put in front; ``None`` when the typed part
    cannot be told apart (see the contract)."""
    if not text.lstrip().startswith(OPENING):
        return text
    rest = text
    while rest.lstrip().startswith(OPENING):
        rest = rest.lstrip()
        end = rest.find(CLOSING)
        if end < 0:
            return None
        if "<" in rest[len(OPENING):end] or ">" in rest[len(OPENING):end]:
            return None  # Gemini escapes both in every context, so a raw one means foreign framing
        rest = rest[end + len(CLOSING):]
    typed = rest.lstrip("\r\n")
    return None if OPENING in typed or CLOSING in typed else typed


def strip_escaped(text: str, block: str) -> str:
    """``text`` without ``block`` as Gemini quotes it inside ``<hook_context>`` (``<`` and ``>`` escaped)."""
    quoted = block.replace("<", "&lt;").replace(">", "&gt;")
    return text.replace(quoted, "") if quoted else text


def digest(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def _texts(parts: object) -> str | None:
    """The joined text of a list of ``{"text": …}`` parts; ``None`` for any other shape. A part after
    the first that is one whole ``<hook_context>`` block is context a BeforeAgent hook added (Gemini
    appends it as its own part), never typed: it is left out."""
    if not isinstance(parts, list) or not parts:
        return None
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
        return None
    kept = [texts[0]] + [t for t in texts[1:] if not _context_only(t)]
    return "".join(t for t in kept if isinstance(t, str))


def _context_only(text: object) -> bool:
    if not isinstance(text, str):
        return False
    body = text.strip()
    return (body.startswith(OPENING) and body.endswith(CLOSING) and body.count(OPENING) == 1
            and body.count(CLOSING) == 1 and "<" not in body[len(OPENING):-len(CLOSING)])


def _tail(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - TAIL_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        chunks, left = [], info.st_size - start
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def verdict(path: str | None, wanted: str) -> str | None:
    """``None`` (typed by the user), ``COMMAND_EXPANSION`` or ``UNCONFIRMED_PROMPT``; see the contract."""
    import json  # drain only

    raw = _tail(path) if path else None
    if raw is None:
        return "UNCONFIRMED_PROMPT"
    for line in reversed(raw.split(b"\n")):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the partial first line of a tail, or a torn write: never a confirmation
        if not isinstance(record, dict) or record.get("type") != "user":
            continue
        content = _texts(record.get("content"))
        typed = typed_part(content) if content is not None else None
        if typed is None or digest(typed) != wanted:
            continue
        if "displayContent" not in record:
            return None
        shown = _texts(record.get("displayContent"))
        return None if shown is not None and typed_part(shown) == typed else "COMMAND_EXPANSION"
    return "UNCONFIRMED_PROMPT"
