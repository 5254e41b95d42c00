"""Durable, private file-system primitives.

Contract:
- ``write_atomic`` publishes a whole file or nothing: temp file in the same directory (mode set
  before any byte is written), fsync of the file, ``os.replace``, fsync of the directory. A crash
  at any point leaves either the old file or the new one, never a torn file or a stray temp.
- Every directory cm creates is 0700 and every file 0600.
- ``require_real_path`` refuses any path whose components include a symlink: the data root is the
  user's memory and must not be redirected by a link planted inside it.
Stdlib only (hook path).
"""

from __future__ import annotations

import os
import stat
import sys

from cmrunner.core.errors import CmError


def fsync_fd(fd: int) -> None:
    """fsync that really reaches the medium (F_FULLFSYNC on macOS, where fsync does not)."""
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def fsync_dir(path: str) -> None:
    """Make a rename or unlink inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def require_real_path(path: str, what: str) -> None:
    """Fail with UNSAFE_PATH unless ``path`` is absolute and no component is a symlink."""
    if not os.path.isabs(path):
        raise CmError("PATH_NOT_ABSOLUTE", f"{what} must be an absolute path; pass one")
    normal = os.path.normpath(path)
    if os.path.realpath(normal) != normal:
        raise CmError(
            "UNSAFE_PATH",
            f"{what} {normal} passes through a symbolic link; use the real path instead",
        )


def ensure_private_dir(path: str, what: str) -> None:
    """Create ``path`` (and missing parents) as 0700 directories; refuse links and non-dirs."""
    require_real_path(os.path.dirname(os.path.normpath(path)) or "/", what)
    missing: list[str] = []
    current = os.path.normpath(path)
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise CmError(
                "DATA_ROOT_UNWRITABLE",
                f"cannot create {what} at {directory} ({exc.strerror}); check its permissions",
            ) from None
    if os.path.islink(path) or not os.path.isdir(path):
        raise CmError("UNSAFE_PATH", f"{what} {path} is not a real directory; remove or fix it")
    require_real_path(path, what)
    if missing:
        fsync_dir(os.path.dirname(missing[-1]))


def data_root_problem(root: str) -> tuple[str | None, str]:
    """Whether ``root`` is (or can become) a safe data root: ``(None, what it is)`` or ``(CODE, fix)``.

    Safe: a real directory (no symlinked component) of mode 0700 that this user can write, or a
    path whose nearest existing ancestor is a writable real directory (cm creates it 0700).
    Only looks; creates nothing (``cm status`` and ``cm doctor`` share it)."""
    existing = root
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if os.path.realpath(existing) != existing:
        return "UNSAFE_PATH", (f"{root} passes through a symbolic link at or above {existing}; "
                               "set dataRoot to the real path (`cm config set dataRoot …`)")
    if existing != root:
        if not os.path.isdir(existing):
            return "DATA_ROOT_UNWRITABLE", (f"{root} cannot be created: {existing} is not a directory; "
                                            "set dataRoot to a creatable path")
        if not os.access(existing, os.W_OK | os.X_OK):
            return "DATA_ROOT_UNWRITABLE", (f"{root} cannot be created: {existing} is not writable by this user; "
                                            "fix its permissions or set dataRoot elsewhere")
        return None, f"{root} (not created yet; cm creates it with mode 0700)"
    info = os.stat(root)
    if not stat.S_ISDIR(info.st_mode):
        return "UNSAFE_PATH", f"{root} is not a directory; remove it or set dataRoot elsewhere"
    mode = stat.S_IMODE(info.st_mode)
    if mode != 0o700:
        # group/other access exposes the memory; missing owner bits stop cm writing it
        code = "DATA_ROOT_NOT_PRIVATE" if mode & 0o077 else "DATA_ROOT_UNWRITABLE"
        return code, f"{root} has mode {mode:04o}, not 0700; run `chmod 700 {root}`"
    if not os.access(root, os.W_OK | os.X_OK):
        return "DATA_ROOT_UNWRITABLE", f"{root} is not writable by this user; fix its owner or permissions"
    return None, f"{root} (0700, writable)"


def write_atomic(path: str, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see module contract)."""
    directory = os.path.dirname(path)
    if os.path.islink(path):
        raise CmError("UNSAFE_PATH", f"{path} is a symbolic link; remove it and retry")
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            fsync_fd(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)


def read_regular_file(path: str, limit: int, what: str) -> bytes | None:
    """Read a regular, non-symlink file of at most ``limit`` bytes; ``None`` if absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CmError("UNSAFE_PATH", f"{what} {path} cannot be opened safely ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        import stat as _stat

        if not _stat.S_ISREG(st.st_mode):
            raise CmError("UNSAFE_PATH", f"{what} {path} is not a regular file; remove or fix it")
        if st.st_size > limit:
            raise CmError("FILE_TOO_LARGE", f"{what} {path} is larger than {limit} bytes")
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise CmError("FILE_TOO_LARGE", f"{what} {path} is larger than {limit} bytes")
        return data
    finally:
        os.close(fd)
