"""The ``cm`` console script: a dispatcher that keeps hook paths light.

``cm hook …`` (``codex``/``work``, ``claude``, ``gemini``), ``cm capture …`` and ``cm session-refresh`` run under a host's timeout, so they are routed to stdlib-only
modules before click (or anything else heavy) is imported; ``cm session-drain`` goes straight to
the Writer side, ``cm memory-agent-mcp`` (started by an agent CLI running the Memory Agent) to its
stdlib relay. When ``COMMON_MEMORY_AGENT_SESSION`` is set (that CLI's environment) every hook
entry exits 0 at once, before anything is read or imported. Every other command, and ``--help`` on any of them, is the click CLI in ``cmrunner.cli``.

Invariant: a hook path ends its process with ``os._exit`` once its body has returned (see
``_hook_exit``); nothing on those paths may rely on interpreter teardown (``atexit``, finalizers),
nor on the cyclic garbage collector, which is off for the process's one event.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at import; the hook path never needs it at run time
    from typing import NoReturn


def _hook_exit(code: int) -> NoReturn:
    """End a hook process at once, without interpreter teardown.

    Why: by now the one output line is written (unbuffered, ``os.write``), every write is committed
    and the gate is released, so teardown (destroying every module and object) would only spend
    milliseconds of the host's timeout.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# Mirrors ``cmrunner.core.configdefs.MEMORY_AGENT_MARKER`` (a test holds them equal): read here
# without importing anything, before any hook module loads.
_MEMORY_AGENT_MARKER = "COMMON_MEMORY_AGENT_SESSION"
_HOOK_COMMANDS = ("hook", "capture", "session-refresh")


def main() -> None:
    argv = sys.argv[1:]
    command = argv[0] if argv else ""
    if "--help" in argv or "-h" in argv:
        command = ""  # help is click's job: it prints the entry's usage without running it
    if command in _HOOK_COMMANDS:
        # A hook process lives for one event and ends with os._exit; the cyclic collector would
        # only walk the freshly imported modules' objects, several passes during start-up, and find
        # nothing to free (measured: a full pass landed inside one import on every turn).
        gc.disable()
    if command in _HOOK_COMMANDS and os.environ.get(_MEMORY_AGENT_MARKER):
        # An agent CLI running cm's Memory Agent: its session is cm's own work, never captured,
        # never given memory. The hook does nothing and the host goes on (exit 0, no output).
        _hook_exit(0)
    if command == "memory-agent-mcp":
        from cmrunner.agentrt.agentcli import relay

        sys.exit(relay.main(argv[1:]))
    if command == "hook" and len(argv) > 1 and argv[1] == "claude":
        from cmrunner.hooks import claude

        _hook_exit(claude.main(argv[2:]))
    if command == "hook" and len(argv) > 1 and argv[1] == "gemini":
        from cmrunner.hooks import gemini

        _hook_exit(gemini.main(argv[2:]))
    if command == "hook":
        from cmrunner.hooks import codex

        _hook_exit(codex.main(argv[1:]))
    if command == "session-refresh":
        from cmrunner.hooks import refresh

        _hook_exit(refresh.main(argv[1:]))
    if command == "capture":
        from cmrunner.hooks import pi

        _hook_exit(pi.main(argv[1:]))
    if command == "session-drain":
        from cmrunner.writer_proc import drain

        sys.exit(drain.main(argv[1:]))
    from cmrunner import cli

    cli.main()
