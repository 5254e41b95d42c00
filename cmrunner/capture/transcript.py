"""Reading the new complete lines of a host transcript since the session's cursor.

Contract:
- The transcript must be a regular file reached without following a symlink, that can be read
  (``CODEX_UNSAFE_TRANSCRIPT``: a link, a FIFO, a directory, ``/proc/self/mem``).
- A cursor records the file's device and inode, the byte offset read so far and a digest of the
  first and the last (up to) 256 bytes before it. A different file, a file shorter than the cursor or changed bytes
  before the cursor is ``CODEX_TRANSCRIPT_REPLACED``: nothing is admitted from it.
- Only complete lines are taken; a trailing partial line waits for the next event.
- At most ``limit`` bytes are taken in one event (``SESSION_CAPACITY_EXCEEDED`` beyond that).
Stdlib only.
"""

from __future__ import annotations

import os
import stat

from cmrunner.core.errors import CmError
from cmrunner.core.sha import sha256

_DIGEST_WINDOW = 256
# The codes this module raises (a session-level failure each).
CODES = frozenset({"CODEX_TRANSCRIPT_MISSING", "CODEX_UNSAFE_TRANSCRIPT", "CODEX_TRANSCRIPT_REPLACED",
                   "CODEX_PARTIAL_TRANSCRIPT", "SESSION_CAPACITY_EXCEEDED"})


class Cursor:
    __slots__ = ("path", "device", "inode", "offset", "tail_digest")

    def __init__(self, path: str, device: int, inode: int, offset: int, tail_digest: str) -> None:
        self.path = path
        self.device = device
        self.inode = inode
        self.offset = offset
        self.tail_digest = tail_digest


class Tail:
    """New complete lines ``body`` = bytes [start, end) of the transcript, and the next cursor."""

    __slots__ = ("start", "end", "body", "cursor", "partial")

    def __init__(self, start: int, end: int, body: bytes, cursor: Cursor, partial: bool) -> None:
        self.start = start
        self.end = end
        self.body = body
        self.cursor = cursor
        self.partial = partial


def _open(path: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CmError("CODEX_TRANSCRIPT_MISSING", "the session transcript does not exist; nothing was admitted") from None
    except OSError:
        raise CmError("CODEX_UNSAFE_TRANSCRIPT", "the session transcript is a symbolic link or cannot be opened; nothing was admitted") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise CmError("CODEX_UNSAFE_TRANSCRIPT", "the session transcript is not a regular file; nothing was admitted")
    return fd, st


def _pread_exact(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        try:
            chunk = os.pread(fd, min(length, 1 << 20), offset)
        except OSError:  # e.g. /proc/self/mem: a "regular file" that refuses to be read
            raise CmError("CODEX_UNSAFE_TRANSCRIPT", "the session transcript cannot be read; nothing was admitted") from None
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _digest_before(fd: int, offset: int) -> str:
    """Digest of the first and the last 256 bytes before ``offset``.

    Hashing the whole prefix would cost a full read of a long transcript on every event; the head
    (which names the session) and the bytes just before the cursor catch a replaced file or a
    rewritten tail, which are what would make the next tail misaligned.
    """
    head = _pread_exact(fd, 0, min(_DIGEST_WINDOW, offset))
    start = max(0, offset - _DIGEST_WINDOW)
    return sha256(head + b"|" + _pread_exact(fd, start, offset - start)).hexdigest()


def _replaced() -> CmError:
    return CmError(
        "CODEX_TRANSCRIPT_REPLACED",
        "the session transcript shrank or was replaced since the last event; nothing was admitted "
        "(start a new session, or see `cm status`)",
    )


def start_cursor(path: str) -> Cursor:
    """A cursor at the end of the last complete line: history before activation is not admitted."""
    fd, st = _open(path)
    try:
        size = st.st_size
        end = size
        if size:
            window = 65536
            while end > 0:
                begin = max(0, end - window)
                chunk = _pread_exact(fd, begin, end - begin)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    end = begin + newline + 1
                    break
                end = begin
        return Cursor(path, st.st_dev, st.st_ino, end, _digest_before(fd, end))
    finally:
        os.close(fd)


def read_tail(cursor: Cursor, path: str, limit: int) -> Tail:
    """The complete lines after ``cursor`` (see module contract)."""
    if path != cursor.path:
        raise _replaced()
    fd, st = _open(path)
    try:
        if (st.st_dev, st.st_ino) != (cursor.device, cursor.inode) or st.st_size < cursor.offset:
            raise _replaced()
        if _digest_before(fd, cursor.offset) != cursor.tail_digest:
            raise _replaced()
        available = st.st_size - cursor.offset
        data = _pread_exact(fd, cursor.offset, min(available, limit + 1))
        newline = data.rfind(b"\n")
        body = data[: newline + 1] if newline >= 0 else b""
        if len(body) > limit or (newline < 0 and len(data) > limit):
            raise CmError(
                "SESSION_CAPACITY_EXCEEDED",
                f"the transcript grew by more than {limit} bytes in one event; raise sessionCache.maxSessionBytes",
            )
        end = cursor.offset + len(body)
        new_cursor = Cursor(path, cursor.device, cursor.inode, end, _digest_before(fd, end))
        return Tail(cursor.offset, end, body, new_cursor, partial=len(data) > len(body))
    finally:
        os.close(fd)


def first_line(path: str, limit: int) -> bytes:
    """The transcript's first complete line (with its newline), read through the same safe open."""
    fd, _st = _open(path)
    try:
        data = _pread_exact(fd, 0, limit)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    if end < 0:
        raise CmError("CODEX_PARTIAL_TRANSCRIPT", "the transcript has no complete first line yet; nothing was admitted")
    return data[: end + 1]

