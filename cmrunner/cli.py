"""The management CLI (click): the only place that prints and chooses exit codes.

Commands live in ``cmrunner/commands/`` (one module per area) and register on the group in
``commands/base.py``, whose ``CmGroup`` turns every ``CmError`` into ``cm: CODE: message`` and exit
code 1. ``cm hook``, ``cm capture``, ``cm session-refresh`` and ``cm session-drain`` are dispatched
in ``cmrunner.entry`` before this module is imported.
"""

from __future__ import annotations

from cmrunner.commands import (  # noqa: F401 - registration
    access,
    agents,
    control,
    entries,
    eval as eval_command,
    generators,
    manage,
    secrets,
    setup,
    sync,
    synthetic,
    usage,
    work,
)
from cmrunner.commands.base import cli


def main() -> None:
    cli(prog_name="cm")
