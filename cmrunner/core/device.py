"""This machine's device name: what ``cm status`` shows and what sync records as the author.

Contract:
- ``name(cfg)`` is ``deviceName`` from ``config.json`` when set (``cm config set deviceName laptop``),
  else ``default_name()``. The result always matches ``configdefs.DEVICE_NAME_PATTERN`` (1-64 of
  ``[A-Za-z0-9._-]``, starting with a letter or digit), so it is safe in a commit message, a file
  name or one line of output without quoting.
- ``default_name()`` is the hostname's first label (``laptop.example.com`` -> ``laptop``: the
  domain says where the machine sits, which a synced remote need not learn), with every other
  character turned into ``-``; a hostname with nothing usable gives ``device``.
- The name is per machine: ``config.json`` is never synced. It is a label, not an identity: two
  machines may share a name, and nothing may rely on it being unique.
Stdlib only, no I/O beyond ``os.uname``.
"""

from __future__ import annotations

import os
import re

from cmrunner.core.config import Config
from cmrunner.core.configdefs import DEVICE_NAME_PATTERN

FALLBACK = "device"
MAX_LENGTH = 64
_VALID = re.compile(rf"{DEVICE_NAME_PATTERN}\Z")


def sanitized(hostname: str) -> str:
    """A device name made from ``hostname``: its first label, other characters as ``-``."""
    label = hostname.strip().split(".", 1)[0]
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", label).lstrip("-_")[:MAX_LENGTH].rstrip("-_")
    return cleaned if _VALID.match(cleaned) else FALLBACK


def default_name() -> str:
    """The name of a machine that has not set one: its sanitized hostname."""
    try:
        return sanitized(os.uname().nodename)
    except OSError:
        return FALLBACK


def name(cfg: Config) -> str:
    """This machine's device name: ``deviceName`` from the configuration, else ``default_name()``."""
    configured = cfg.data.get("deviceName")
    return configured if isinstance(configured, str) else default_name()


def source(cfg: Config) -> str:
    """Where ``name(cfg)`` came from: ``"config"`` or ``"hostname"``."""
    return "config" if isinstance(cfg.data.get("deviceName"), str) else "hostname"
