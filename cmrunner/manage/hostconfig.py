"""Shared pieces of the host configuration generators: pins, commands, TOML tables, bundles.

Contract:
- ``Pins`` records the absolute paths a generated configuration depends on: the interpreter
  (``sys.executable``), the ``cm`` console script, the installed ``cmrunner`` package, the
  configuration home and the data root. Every generated file shows them in a header so a reviewer
  sees exactly what will run; moving the installation means regenerating.
- Commands do not depend on a console-script shebang or on ``PATH``, and run under ``-I``, which
  keeps a hook that runs in an arbitrary project directory from importing a ``cmrunner`` (or
  anything else) from that directory, from ``PYTHONPATH`` or from user site-packages. Hook entries
  (``hook_argv``: a host's per-event hooks, Codex's refresh command, Pi's capture) are
  ``<abs python> -I -S <abs cmrunner folder>/__main__.py …``, which skips ``site`` and ``-m``
  (``cmrunner/__main__.py`` says how the script finds its own installation). Everything else
  (``module_argv``: MCP servers, the WSL relay) is ``<abs python> -I -m cmrunner …``, the form the
  drain is spawned with. ``LEGACY_HOOK_FORM`` is what hook entries held before issue 35: such an
  entry is still cm's own (the manifest records its exact value) and ``cm doctor`` says to
  refresh it. Shell commands are POSIX-quoted with ``shlex``.
- TOML is built with tomlkit (valid quoting whatever the paths hold). ``merge_toml`` adds generated
  tables to an existing file and keeps its comments, order and formatting; a key that already
  holds a different value is ``CONFIG_ENTRY_EXISTS``, never overwritten.
- ``write_bundle`` refuses an output folder that exists and is not empty (``OUTPUT_NOT_EMPTY``),
  stages the files next to it and renames the whole folder into place: nothing that exists is ever
  overwritten, and a failure leaves nothing half-written.
- The Codex hook set is the six events cm uses, each with ``timeout = 3`` (hosts.md §1.5).
- The Codex profile sets ``mcp_optional_startup_grace_ms`` (``MCP_STARTUP_GRACE_MS``) so that the
  first turn waits for cm's read server to start instead of running without its tools.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable

import tomlkit
from tomlkit.items import AoT, Table

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "Interrupt", "SessionEnd")
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
SESSION_START_MATCHER = "startup|resume|compact|clear"
HOOK_TIMEOUT = 3
READ_TOOLS = ["memory_read", "memory_status"]
# Codex (0.147 and later) gives an optional MCP server about one second to start before a turn and
# then runs the turn without its tools. cm's read server imports the MCP SDK first (1.2-2 s on a
# 2-core machine, docs/benchmarks.md), so a `codex exec` turn would never see memory_read. The
# profile lets optional servers start for up to this long; the bound keeps a hung server from
# holding a first turn. Not `required = true`: a cm failure must never stop Codex from starting.
MCP_STARTUP_GRACE_MS = 5000
INIT_TOOLS = ["memory_init", "memory_status"]
# The interpreter options after ``-I`` of ``module_argv``; a hook entry in this form is an older cm's.
LEGACY_HOOK_FORM = ("-m", "cmrunner")
_WSL_DISTRO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_LINUX_USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\$?$")


class Pins:
    """The absolute paths a generated configuration is pinned to."""

    __slots__ = ("python", "cm", "package", "version", "home", "data_root")

    def __init__(self, python: str, cm: str | None, package: str, version: str, home: str, data_root: str) -> None:
        self.python = python
        self.cm = cm
        self.package = package
        self.version = version
        self.home = home
        self.data_root = data_root

    @classmethod
    def current(cls, home: str) -> Pins:
        from importlib.metadata import PackageNotFoundError, version

        import cmrunner

        python = os.path.abspath(sys.executable)
        if not os.path.isfile(python):
            raise CmError("INTERPRETER_NOT_FOUND",
                          "the running Python interpreter has no absolute path; run cm from its venv")
        script = os.path.join(os.path.dirname(python), "cm")
        try:
            release = version("common-memory-cm")
        except PackageNotFoundError:  # pragma: no cover - source checkout
            release = "unknown"
        cfg = config_mod.load(home)
        return cls(python, script if os.path.isfile(script) else None,
                   os.path.dirname(os.path.abspath(cmrunner.__file__)), release, home, cfg.data_root)

    def module_argv(self, *args: str) -> list[str]:
        return [self.python, "-I", *LEGACY_HOOK_FORM, *args]

    def hook_argv(self, *args: str) -> list[str]:
        """The pinned per-event form (module contract): no ``site``, no ``runpy``."""
        return [self.python, "-I", "-S", os.path.join(self.package, "__main__.py"), *args]

    def header(self, title: str, extra: Iterable[str] = ()) -> list[str]:
        lines = [title, "Review before use. This configuration pins these absolute paths; regenerate it after moving",
                 "the installation or changing Python or COMMON_MEMORY_HOME:",
                 f"  interpreter:  {self.python}",
                 f"  cm entry:     {self.cm or '(no cm script next to the interpreter)'}",
                 f"  cmrunner:     {self.package} (version {self.version})",
                 f"  config home:  {self.home}",
                 f"  data root:    {self.data_root}"]
        return lines + list(extra)


def shell_command(argv: list[str]) -> str:
    return shlex.join(argv)


def hook_form(argv: list[str]) -> str:
    """Which form a hook entry's argv is: ``"current"`` (``hook_argv``), ``"legacy"`` (an older cm's
    ``-I -m cmrunner``) or ``"other"`` (not a form cm writes)."""
    if argv[1:3] == ["-I", "-S"] and len(argv) > 3 and os.path.basename(argv[3]) == "__main__.py" \
            and os.path.basename(os.path.dirname(argv[3])) == "cmrunner":
        return "current"
    if argv[1:2] == ["-I"] and tuple(argv[2:4]) == LEGACY_HOOK_FORM:
        return "legacy"
    return "other"


def comment_block(lines: Iterable[str]) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def hooks_table(command: str) -> Table:
    """``[[hooks.<Event>]]`` groups running ``command`` for each of the six events."""
    hooks = tomlkit.table(is_super_table=True)
    for event in HOOK_EVENTS:
        handler = tomlkit.table()
        handler.add("type", "command")
        handler.add("command", command)
        handler.add("timeout", HOOK_TIMEOUT)
        if event in CONTEXT_EVENTS:
            # 0 keeps Codex from spilling the injected memory block to a file (hosts.md §1.2).
            handler.add("additionalContextLimit", 0)
        group = tomlkit.table()
        if event == "SessionStart":
            group.add("matcher", SESSION_START_MATCHER)
        handlers = tomlkit.aot()
        handlers.append(handler)
        group.add("hooks", handlers)
        groups = tomlkit.aot()
        groups.append(group)
        hooks.add(event, groups)
    return hooks


def mcp_server_table(command: str, args: list[str], env: dict[str, str] | None, enabled_tools: list[str],
                     approval: str) -> Table:
    server = tomlkit.table()
    server.add("command", command)
    array = tomlkit.array()
    array.extend(args)
    server.add("args", array)
    if env:
        inline = tomlkit.inline_table()
        for key, value in env.items():
            inline.add(key, value)
        server.add("env", inline)
    tools = tomlkit.array()
    tools.extend(enabled_tools)
    server.add("enabled_tools", tools)
    server.add("default_tools_approval_mode", approval)
    return server


def mcp_args(client_id: str, capability: str, workspaces: Iterable[str] = ()) -> list[str]:
    args = ["mcp", "--client-id", client_id, "--capability", capability, "--global"]
    for path in workspaces:
        args += ["--workspace", path]
    return args


def render(header_lines: list[str], tables: list[tuple[str, Table]], settings: dict | None = None) -> str:
    """A commented header, then top-level ``settings``, then the ``tables``."""
    doc = tomlkit.document()
    for key, value in (settings or {}).items():
        doc.add(key, value)
    for key, table in tables:
        doc.add(key, table)
    return comment_block(header_lines) + "\n" + tomlkit.dumps(doc)


# -- merging into an existing file ---------------------------------------------------------------

def _merge(target: Table | tomlkit.TOMLDocument, addition: Table | tomlkit.TOMLDocument, path: str) -> None:
    for key, value in addition.items():
        where = f"{path}.{key}" if path else key
        if key not in target:
            target.add(key, value)
        elif isinstance(target[key], Table) and isinstance(value, Table):
            _merge(target[key], value, where)
        elif isinstance(target[key], AoT) and isinstance(value, AoT):
            present = [item.unwrap() for item in target[key]]
            for item in value:
                if item.unwrap() not in present:
                    target[key].append(item)
        elif target[key].unwrap() != value.unwrap():
            raise CmError("CONFIG_ENTRY_EXISTS",
                          f"{where} already has a different value; edit it by hand or remove it first")


def merge_toml(existing: str, addition: str) -> str:
    """``existing`` with ``addition``'s tables added; comments, order and formatting kept."""
    try:
        doc = tomlkit.parse(existing)
        extra = tomlkit.parse(addition)
    except tomlkit.exceptions.TOMLKitError:
        raise CmError("CONFIG_INVALID", "the existing TOML file does not parse; fix it before merging") from None
    _merge(doc, extra, "")
    return tomlkit.dumps(doc)


# -- bundles ---------------------------------------------------------------------------------

def check_output(output: str) -> str:
    if not output or "\x00" in output or not os.path.isabs(output):
        raise CmError("PATH_NOT_ABSOLUTE", "--output must be an absolute path of a new or empty folder")
    output = os.path.normpath(output)
    if os.path.lexists(output) and (not os.path.isdir(output) or os.path.islink(output) or os.listdir(output)):
        raise CmError("OUTPUT_NOT_EMPTY", f"{output} already exists and is not an empty folder; generated files never "
                                          "overwrite anything, choose a new folder")
    return output


def write_bundle(output: str, files: dict[str, bytes]) -> list[str]:
    """Create ``files`` (relative paths) under the new folder ``output``, all or nothing.

    The files are written into a hidden sibling folder that is renamed into place at the end, so
    a failure part-way leaves nothing behind; ``rename`` refuses to replace a folder that gained
    content meanwhile, and every file is created with ``O_EXCL``.
    """
    output = check_output(output)
    parent = os.path.dirname(output)
    os.makedirs(parent, exist_ok=True)
    staging = os.path.join(parent, f".{os.path.basename(output)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    os.mkdir(staging, 0o755)
    try:
        for relative, data in files.items():
            path = os.path.join(staging, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        try:
            os.rename(staging, output)
        except OSError:
            raise CmError("OUTPUT_NOT_EMPTY", f"{output} appeared or gained files while the bundle was written; "
                                              "choose a new folder") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [os.path.join(output, relative) for relative in files]


# -- WSL ---------------------------------------------------------------------------------------

def wsl_identity(distro: str | None, user: str | None) -> tuple[str, str]:
    """The WSL distribution and Linux user to pin (defaults: this distribution, this user)."""
    distro = distro or os.environ.get("WSL_DISTRO_NAME")
    if not distro:
        raise CmError("WSL_IDENTITY_REQUIRED", "this is not a WSL shell (no WSL_DISTRO_NAME); pass --distro")
    if user is None:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    if not _WSL_DISTRO_RE.match(distro):
        raise CmError("INVALID_WSL_IDENTITY", "--distro must be a WSL distribution name (letters, digits, ._-)")
    if not _LINUX_USER_RE.match(user):
        raise CmError("INVALID_WSL_IDENTITY", "--user must be a Linux user name")
    return distro, user


WSL_EXE = r"C:\Windows\System32\wsl.exe"


def wsl_argv(distro: str, user: str, pins: Pins, *args: str) -> list[str]:
    """``wsl.exe`` arguments that start ``cm`` in the pinned distribution, user, interpreter and home."""
    return ["-d", distro, "-u", user, "-e", "/usr/bin/env", f"COMMON_MEMORY_HOME={pins.home}",
            *pins.module_argv(*args)]


def windows_path_of(posix: str) -> str | None:
    """The Windows form of a ``/mnt/<drive>/…`` path, or ``None`` for any other path."""
    m = re.match(r"^/mnt/([a-zA-Z])(/.*)?$", posix)
    if m is None:
        return None
    rest = (m.group(2) or "/").replace("/", "\\")
    return f"{m.group(1).upper()}:{rest}"
