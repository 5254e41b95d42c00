"""The private ``.env``: the only source of the model key and private network values.

Contract:
- Lines are ``NAME=value`` (an optional ``export`` prefix, ``#`` comments, blank lines; values may
  be wrapped in single or double quotes). Values are single-line.
- The file must be a regular, non-symlink file; it is written atomically with mode 0600.
- A process environment variable of the same name is ignored: a key is never taken from the
  shell (the specification's "keys are never imported from the shell").
- Nothing here ever logs or returns a value inside an error message.
Stdlib only.
"""

from __future__ import annotations

import os
import re

from cmrunner import fsutil
from cmrunner.errors import ConfigError
from cmrunner.home import env_path

ENV_LIMIT = 64 * 1024
_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def parse(text: str) -> dict[str, str]:
    """Parse ``.env`` text; a malformed line raises ENV_INVALID naming only its line number."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise ConfigError("ENV_INVALID", f".env line {number} is not NAME=value; fix or remove it")
        name, value = match.group(1), match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def read(home: str) -> dict[str, str]:
    """Values of the private ``.env`` (empty when the file does not exist)."""
    path = env_path(home)
    raw = fsutil.read_regular_file(path, ENV_LIMIT, ".env")
    if raw is None:
        return {}
    try:
        return parse(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("ENV_INVALID", ".env is not valid UTF-8; rewrite it with `cm config init --force`") from None


def get_secret(home: str, name: str) -> str | None:
    """The private value of ``name``; ``None`` when absent or empty. Never reads os.environ."""
    value = read(home).get(name)
    return value or None


def _render(values: dict[str, str]) -> bytes:
    lines = ["# cm private values (mode 0600). Never commit or share this file."]
    for name in sorted(values):
        value = values[name]
        if "\n" in value or "\r" in value or "\x00" in value:
            raise ConfigError("ENV_INVALID", f"the value for {name} must be a single line")
        lines.append(f"{name}={value}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def update(home: str, changes: dict[str, str | None]) -> None:
    """Set (or, with ``None``, remove) private values, preserving the others; atomic, 0600."""
    for name in changes:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ConfigError("ENV_INVALID", f"{name!r} is not a valid variable name")
    values = read(home)
    for name, value in changes.items():
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value
    fsutil.ensure_private_dir(home, "configuration home")
    fsutil.write_atomic(env_path(home), _render(values), mode=0o600)
    os.chmod(env_path(home), 0o600)
