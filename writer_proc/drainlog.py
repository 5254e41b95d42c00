"""The small rotating log of the drain and the Writer: ``<dataRoot>/runtime/logs/drain.log`` (``DataPaths.drain_log``).

Contract:
- ``attach(paths)`` adds one size-bounded handler (``MAX_BYTES`` × ``BACKUPS`` rotated files) to the
  ``cm`` logger and returns a function that removes and closes it again. Files are created with
  mode 0600 inside a private (0700, no symlink) directory; an existing log file is never followed
  through a symlink.
- Only the process holding the drain lease attaches it (the drain or ``cm flush``), so one
  process at a time writes and rotates the files.
- Callers log stages, job ids (12 characters), codes, counts and timings — never user text,
  section bodies, keys, proxy credentials or provider bodies. Exceptions are logged as
  ``file:line:function`` frames only (``cmrunner.core.drainfailures.frames``), never their message.
- ``logging`` is heavy for a hook: this module lives on the Writer side and is imported only by
  the drain and flush processes (``tests/test_import_boundary.py``).
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
from collections.abc import Callable

from cmrunner.core import fsutil
from cmrunner.core.home import DataPaths

LOGGER = "cm"
MAX_BYTES = 1024 * 1024
BACKUPS = 3


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    """A rotating handler whose files are created 0600 and never opened through a symlink."""

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.baseFilename, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            pass
        return open(fd, "a", encoding="utf-8", errors="backslashreplace")

    def handleError(self, record: logging.LogRecord) -> None:
        # The stdlib default prints a traceback to stderr (the user's terminal under `cm flush`);
        # a log that cannot be written must never disturb the drain or the terminal.
        pass


def attach(paths: DataPaths) -> Callable[[], None]:
    """Start logging to the data root's drain log; returns the function that stops it."""
    fsutil.ensure_private_dir(paths.runtime, "runtime directory")
    fsutil.ensure_private_dir(paths.logs, "log directory")
    handler = _PrivateRotatingHandler(paths.drain_log, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the host's terminal (cm flush) gets its own one-line output, not the log
    logger.addHandler(handler)

    def detach() -> None:
        logger.removeHandler(handler)
        handler.close()

    return detach


def get(name: str) -> logging.Logger:
    """A child of the ``cm`` logger, e.g. ``get("drain")`` → ``cm.drain``."""
    return logging.getLogger(f"{LOGGER}.{name}")
