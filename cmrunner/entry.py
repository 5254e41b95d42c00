"""The ``cm`` console script: a dispatcher that keeps hook paths light.

``cm hook …``, ``cm capture …`` and ``cm session-refresh`` run under a host's timeout, so they are routed to stdlib-only
modules before click (or anything else heavy) is imported; ``cm session-drain`` goes straight to
the Writer side. Every other command is the click CLI in ``cmrunner.cli``.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    command = argv[0] if argv else ""
    if command == "hook":
        from cmrunner.hooks import codex

        sys.exit(codex.main(argv[1:]))
    if command == "session-refresh":
        from cmrunner.hooks import refresh

        sys.exit(refresh.main(argv[1:]))
    if command == "capture":
        from cmrunner.hooks import pi

        sys.exit(pi.main(argv[1:]))
    if command == "session-drain":
        from cmrunner.writer_proc import drain

        sys.exit(drain.main(argv[1:]))
    from cmrunner import cli

    cli.main()
