"""Process identity: ``(boot_id, pid, starttime)``, and discovery of the host process.

Contract:
- ``starttime`` is the raw clock-tick field 22 of ``/proc/<pid>/stat``: unlike psutil's
  ``create_time()`` it does not move when the wall clock is stepped. Where ``/proc`` does not exist
  (macOS), psutil's create time (ms) and boot time stand in.
- A recorded identity is alive only if boot id, pid and start time all still match, so a PID
  reused after a reboot or by another program never counts as the old process.
- ``host_instance`` names the Codex (or Work) process that fired a hook: the explicit
  ``COMMON_MEMORY_HOST_INSTANCE`` a bridge passes, else the nearest ancestor (≤ 32 levels) whose
  executable's name starts with ``codex``. Failure is ``CODEX_HOST_PROCESS_UNCONFIRMED``.
- ``launcher_instance`` names the Claude Code or Gemini CLI process the same way, as the nearest
  ancestor that is not a shell or wrapper (``WRAPPERS``); ``parse_key`` reads an instance back into
  an identity so the drain can tell when that process has exited.
Stdlib only on Linux (hook path); psutil is imported only where ``/proc`` is missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from cmrunner.core.errors import CmError

HOST_INSTANCE_ENV = "COMMON_MEMORY_HOST_INSTANCE"
# An explicit instance: an ASCII letter or digit, then up to 199 of those or ``:._-``. Checked with
# sets, not ``re``: loading ``re`` (and ``enum``) is most of what a hook would import beyond the floor.
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HOST_INSTANCE_CHARS = _ALNUM | frozenset(":._-")
_HOST_INSTANCE_MAX = 200
_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_MAX_ANCESTORS = 32
_HEX = frozenset("0123456789abcdef")
_DIGITS = frozenset("0123456789")
_UUID_DASHES = (8, 13, 18, 23)
# What stands between a host and its hook command: shells and wrappers, never the host itself.
WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox", "env", "timeout", "nice",
                      "nohup", "setsid", "stdbuf", "time"})


def is_plain_id(text: str) -> bool:
    """Whether ``text`` may name a host instance, or a Pi session or event (the whole string; no
    trailing newline): ``[A-Za-z0-9][A-Za-z0-9:._-]{0,199}``."""
    return (0 < len(text) <= _HOST_INSTANCE_MAX and text[0] in _ALNUM
            and _HOST_INSTANCE_CHARS.issuperset(text))


def _is_boot_id(text: str) -> bool:
    """Whether ``text`` is what ``boot_id`` returns: a lower-case UUID, or ``boot-<digits>``."""
    if text.startswith("boot-"):
        return len(text) > 5 and _DIGITS.issuperset(text[5:])
    return (len(text) == 36 and all(text[i] == "-" for i in _UUID_DASHES)
            and _HEX.issuperset(text.replace("-", "")) and text.count("-") == 4)


class Identity:
    """One process's identity; equality is all three fields."""

    __slots__ = ("boot_id", "pid", "starttime")

    def __init__(self, boot_id: str, pid: int, starttime: int) -> None:
        self.boot_id = boot_id
        self.pid = pid
        self.starttime = starttime

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Identity)
            and (self.boot_id, self.pid, self.starttime) == (other.boot_id, other.pid, other.starttime)
        )

    def __hash__(self) -> int:
        return hash((self.boot_id, self.pid, self.starttime))

    def __repr__(self) -> str:
        return f"Identity({self.boot_id[:8]}…, pid={self.pid}, start={self.starttime})"

    def key(self) -> str:
        return f"{self.boot_id}:{self.pid}:{self.starttime}"


_boot_id_cache: str | None = None


def boot_id() -> str:
    """This boot's id: the kernel's random boot id, or psutil's boot time where it is missing."""
    global _boot_id_cache
    if _boot_id_cache is None:
        try:
            # Binary, then decode: a text-mode open with an encoding imports a codec module.
            with open(_BOOT_ID_PATH, "rb") as handle:
                _boot_id_cache = handle.read().decode("ascii").strip()
        except OSError:
            import psutil

            _boot_id_cache = f"boot-{int(psutil.boot_time())}"
    return _boot_id_cache


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces or parens)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    close = raw.rfind(b")")
    if close < 0:
        return None
    return raw[close + 2:].decode("ascii", "replace").split()


def starttime(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or ``None`` if it does not exist."""
    if os.path.isdir("/proc/self"):
        fields = _stat_fields(pid)
        # After the name, field 3 (state) is index 0, so field 22 (starttime) is index 19.
        return int(fields[19]) if fields and len(fields) > 19 else None
    import psutil  # pragma: no cover - platforms without /proc

    try:
        return int(psutil.Process(pid).create_time() * 1000)
    except psutil.Error:
        return None


def parent_pid(pid: int) -> int | None:
    if os.path.isdir("/proc/self"):
        fields = _stat_fields(pid)
        return int(fields[1]) if fields and len(fields) > 1 else None
    import psutil  # pragma: no cover - platforms without /proc

    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def of(pid: int) -> Identity | None:
    """The identity of a running process, or ``None`` if it does not exist."""
    start = starttime(pid)
    return None if start is None else Identity(boot_id(), pid, start)


def current() -> Identity:
    found = of(os.getpid())
    if found is None:  # pragma: no cover - /proc/self always exists for ourselves
        raise CmError("PROCESS_IDENTITY_UNSUPPORTED", "cannot read this process's start time")
    return found


def is_alive(recorded: Identity) -> bool:
    """True only if the same process (same boot, pid and start time) is still running."""
    if recorded.boot_id != boot_id():
        return False
    start = starttime(recorded.pid)
    if start is None or start != recorded.starttime:
        return False
    if os.path.isdir("/proc/self"):
        fields = _stat_fields(recorded.pid)
        if fields and fields[0] in ("Z", "X"):  # exited, waiting to be reaped
            return False
    return True


def _exe_name(pid: int) -> str | None:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def _explicit_instance(environ: dict[str, str] | os._Environ[str]) -> str | None:
    explicit = environ.get(HOST_INSTANCE_ENV)
    if explicit is not None and not is_plain_id(explicit):
        raise CmError(
            "INVALID_HOST_INSTANCE",
            f"{HOST_INSTANCE_ENV} must be 1-200 characters of letters, digits and :._-; fix the bridge",
        )
    return explicit


def _ancestor(accept: Callable[[str], bool]) -> Identity | None:
    """The nearest ancestor (at most 32 levels up) whose executable's name ``accept`` takes."""
    pid = os.getppid()
    for _ in range(_MAX_ANCESTORS):
        if pid <= 1:
            break
        name = _exe_name(pid)
        if name is not None and accept(name):
            found = of(pid)
            if found is not None:
                return found
        parent = parent_pid(pid)
        if parent is None or parent == pid:
            break
        pid = parent
    return None


def host_instance(env: dict[str, str] | None = None) -> str:
    """Identify the host process that fired this hook (see module contract)."""
    explicit = _explicit_instance(os.environ if env is None else env)
    if explicit is not None:
        return explicit
    if not os.path.isdir("/proc/self"):
        raise CmError(
            "CODEX_PROCESS_IDENTITY_UNSUPPORTED",
            f"this platform has no /proc; the host bridge must set {HOST_INSTANCE_ENV}",
        )
    found = _ancestor(lambda name: name.startswith("codex"))
    if found is not None:
        return found.key()
    raise CmError(
        "CODEX_HOST_PROCESS_UNCONFIRMED",
        "no Codex process found among this hook's ancestors; run it from Codex "
        f"or set {HOST_INSTANCE_ENV}",
    )


def launcher_instance(host: str) -> str:
    """Identify the host process (Claude Code, Gemini CLI) that ran this hook: ``COMMON_MEMORY_HOST_INSTANCE``
    if set, else the nearest ancestor that is not a shell or a command wrapper — those hosts run a
    hook command through a shell, so the first other process up the chain is the host itself."""
    explicit = _explicit_instance(os.environ)
    if explicit is not None:
        return explicit
    found = _ancestor(lambda name: name not in WRAPPERS) if os.path.isdir("/proc/self") else None
    if found is None:
        raise CmError("HOST_PROCESS_UNCONFIRMED",
                      f"no {host} process found among this hook's ancestors; run it from {host} or set {HOST_INSTANCE_ENV}")
    return found.key()


def parse_key(key: str) -> Identity | None:
    """The identity a ``key()`` string names, or ``None`` for an explicit (bridge-chosen) instance."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not _is_boot_id(parts[0]) or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return Identity(parts[0], int(parts[1]), int(parts[2]))
