"""The drain log stays small and private: rotation bounds it, every file is 0600, no symlink is followed."""

from __future__ import annotations

import logging
import os
import stat

from writer_support import configure

from cmrunner.writer_proc import drainlog


def _file_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger(drainlog.LOGGER).handlers if isinstance(h, logging.FileHandler)]


def test_the_log_rotates_within_its_bound_and_every_file_is_private(home):
    paths, _cfg = configure(home)
    detach = drainlog.attach(paths)
    try:
        log = drainlog.get("test")
        line = "job 0123456789ab committed in 12 ms " + "x" * 200
        for _ in range(((drainlog.BACKUPS + 2) * drainlog.MAX_BYTES) // len(line)):
            log.info(line)
    finally:
        detach()
    names = sorted(os.listdir(paths.logs))
    assert names == ["drain.log"] + [f"drain.log.{i}" for i in range(1, drainlog.BACKUPS + 1)]
    for name in names:
        info = os.stat(os.path.join(paths.logs, name))
        assert stat.S_IMODE(info.st_mode) == 0o600, name
        assert info.st_size <= drainlog.MAX_BYTES, name
    assert stat.S_IMODE(os.stat(paths.logs).st_mode) == 0o700
    assert not _file_handlers(), "detach removes the handler"


def test_a_symlinked_log_is_never_followed(home, tmp_path):
    paths, _cfg = configure(home)
    os.makedirs(paths.logs, mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    os.symlink(victim, paths.drain_log)
    try:
        drainlog.attach(paths)
    except OSError:
        pass
    else:  # pragma: no cover - the open must refuse the link
        raise AssertionError("the log was opened through a symlink")
    assert victim.read_text() == "untouched\n"
    assert not _file_handlers()
