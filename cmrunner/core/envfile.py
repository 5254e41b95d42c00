"""The private ``.env``: the only source of the model key and private network values.

Contract:
- The grammar is python-dotenv's (``NAME=value``, an optional ``export`` prefix, ``#`` comments,
  quoted values with its escapes), parsed by its own parser so cm reads exactly what other dotenv
  tools read. Values are single-line; a line the parser rejects is ``ENV_INVALID`` naming its line.
- Writing renders a value bare when dotenv reads it back unchanged, else single-quoted in that
  grammar (so ordinary keys keep the ``NAME=value`` lines cm always wrote), and goes through
  ``fsutil.write_atomic`` (fsync of file and directory, mode 0600) rather than dotenv's
  ``set_key``, which neither fsyncs nor sets the mode before the rename.
- The file must be a regular, non-symlink file; it is written atomically with mode 0600.
- A process environment variable of the same name is ignored: a key is never taken from the
  shell (the specification's "keys are never imported from the shell").
- Nothing here ever logs or returns a value inside an error message.
- Never on a hook or capture path (dotenv is outside the hook's import budget).
"""

from __future__ import annotations

import io
import os
import re

from dotenv.parser import parse_stream

from cmrunner.core import fsutil
from cmrunner.core.errors import ConfigError
from cmrunner.core.home import env_path

ENV_LIMIT = 64 * 1024
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Values dotenv reads back unchanged without quotes (no blanks, quotes, ``#``, ``$`` or backslash).
_BARE = re.compile(r"^[A-Za-z0-9_\-.,/:+=@~%]*$")


def parse(text: str) -> dict[str, str]:
    """Parse ``.env`` text; a malformed line raises ENV_INVALID naming only its line number."""
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        # dotenv starts a binding at the blank lines before it; name the statement's own line.
        text_of = binding.original.string
        number = binding.original.line + text_of[: len(text_of) - len(text_of.lstrip())].count("\n")
        if binding.error or (binding.key is not None and not _NAME.match(binding.key)):
            raise ConfigError("ENV_INVALID", f".env line {number} is not NAME=value; fix or remove it")
        if binding.key is None:
            continue
        value = binding.value or ""
        if "\n" in value or "\r" in value:
            raise ConfigError("ENV_INVALID", f".env line {number}: the value for {binding.key} must be a single line")
        values[binding.key] = value
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
        if _BARE.match(value):
            lines.append(f"{name}={value}")
        else:
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            lines.append(f"{name}='{quoted}'")
    return ("\n".join(lines) + "\n").encode("utf-8")


def update(home: str, changes: dict[str, str | None]) -> None:
    """Set (or, with ``None``, remove) private values, preserving the others; atomic, 0600."""
    for name in changes:
        if not _NAME.match(name):
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
