"""What Gemini CLI's own chat record says about a prompt: typed by the user, or a command's expansion.

Gemini CLI reports a custom slash command to its hooks as the command's *expanded* prompt
(BeforeAgent ``prompt``: ``"Answer with one word. Topic: x"`` for ``/note x``, observed on 0.61.0),
and in ``-p`` it prepends the SessionStart context to the prompt inside ``<hook_context>`` tags.
The payload alone cannot tell an expansion from typed words, so this is the one place cm reads
Gemini's transcript (``transcript_path``, JSONL; a user record holds ``content`` and, for an
expansion, the typed ``displayContent``).

Contract:
- ``typed_part(text)`` cuts a leading ``<hook_context>…</hook_context>`` (``None`` if unclosed).
  Stdlib only and import-light: the hook calls it.
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
    """The prompt without the hook context Gemini prepended; ``None`` when the wrapper never closes."""
    if not text.lstrip().startswith(OPENING):
        return text
    end = text.find(CLOSING)
    return None if end < 0 else text[end + len(CLOSING):].lstrip("\r\n")


def digest(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def _texts(parts: object) -> str | None:
    """The joined text of a list of ``{"text": …}`` parts; ``None`` for any other shape."""
    if not isinstance(parts, list) or not parts:
        return None
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(t for t in texts if isinstance(t, str))


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
