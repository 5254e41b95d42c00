"""``config.json`` (``schemaVersion: 2``): loading, defaults, saving, and the pre-validated cache.

Contract:
- The field set is the reference's (reference-facts Appendix A) with strict keys; the one validator
  is the pydantic model in ``cmrunner.core.configmodel``: an unknown key, a wrong type or a value
  out of range raises ``ConfigError("CONFIG_INVALID", …)`` naming the field path and the accepted
  values. Nothing is silently coerced.
- ``remote`` may be absent: capture needs no model, and an install can capture before a model is
  chosen. Every other section has documented defaults when the whole file is absent.
- The file holds no secrets; keys live in the private ``.env`` (``cmrunner.core.envfile``).
- Saving is atomic and durable (``fsutil.write_atomic``).
- A file that exists but does not load (not JSON, invalid or unsupported fields: ``UNREADABLE_CODES``)
  can be replaced by ``cm config init --force``; ``keep_aside`` first copies it, byte for byte, to
  ``config.json.corrupt-<UTC time>`` (0600, never overwriting an earlier copy), so nothing is lost.
The pre-validated cache (why hooks never import pydantic): every successful full validation (a
``load`` that had to validate, or a ``save``) writes ``<home>/.config.validated.json`` (0600,
atomic) holding the sha256 of the exact ``config.json`` bytes it validated, a stamp of the
installed validator (size and mtime of ``configmodel.py``: installing cm writes it anew, so an
upgrade or reinstall invalidates every cache) and the parsed configuration. ``load`` reads
``config.json``, hashes it with the builtin sha256 (``cmrunner.core.sha``) and, when digest and
stamp both match, uses the cached data without validating again; otherwise (a hand edit, no
cache, a corrupt or foreign cache) it runs the full validation once and rewrites the cache. The
cache is never trusted without that match, and a cache that cannot be written only costs the
next load a validation. Uninstall removes it with ``config.json``.
Stdlib only at import time: hooks read the configuration to find the data root and the disclosure
rules; pydantic is imported only when a full validation is needed.
"""

from __future__ import annotations

import os

from cmrunner.core import fsutil, jsonfast

# AGENT_CLIS, APIS and PRESETS are re-exported: the CLI's choices name them through this module.
from cmrunner.core.configdefs import (
    AGENT_CLIS as AGENT_CLIS,
    APIS as APIS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_SCHEDULER,
    DEFAULT_SESSION_CACHE,
    DEFAULT_SPEND,
    DEFAULT_SYNC_AUTO_DEADLINE_SECONDS,
    DEFAULT_TRASH_RETENTION_DAYS,
    PRESETS as PRESETS,
    SCHEMA_VERSION,
)
from cmrunner.core.errors import CmError, ConfigError
from cmrunner.core.home import config_path, default_data_root
from cmrunner.core.sha import sha256

CONFIG_LIMIT = 1 << 20


def is_agent_cli(remote: dict | None) -> bool:
    """Whether ``remote`` runs the Memory Agent through an agent CLI (no URL, no key)."""
    return bool(remote) and remote.get("provider") == "agent-cli"  # type: ignore[union-attr]


def runtime_label(remote: dict) -> str:
    """One line naming the Memory Agent's runtime: ``<model> at <base URL>``, or the agent CLI."""
    if is_agent_cli(remote):
        model = f", model {remote['model']}" if remote.get("model") else ""
        return f"agent CLI {remote['agent']}{model} (its own login)"
    return f"{remote['model']} at {remote['baseUrl']}"
UNREADABLE_CODES = frozenset({"CONFIG_INVALID", "UNSUPPORTED_CONFIG_VERSION"})
CACHE_NAME = ".config.validated.json"
CACHE_FORMAT = 1


def validate(config: object) -> dict:
    """Validate a parsed configuration strictly; return it unchanged or raise CONFIG_INVALID."""
    from cmrunner.core import configmodel

    return configmodel.validate(config)


def cache_path(home: str) -> str:
    return os.path.join(home, CACHE_NAME)


def _stamp() -> str:
    # One stat, not an import: the validator module is stamped, never loaded, on the hook path.
    try:
        st = os.stat(os.path.join(os.path.dirname(__file__), "configmodel.py"))
    except OSError:
        return f"{CACHE_FORMAT} -"
    return f"{CACHE_FORMAT} {st.st_size}:{st.st_mtime_ns}"


def _digest(raw: bytes) -> str:
    return sha256(raw).hexdigest()


def _cached(home: str, raw: bytes) -> dict | None:
    """The cached configuration validated from exactly ``raw``, or ``None``."""
    try:
        body = fsutil.read_regular_file(cache_path(home), CONFIG_LIMIT + 4096, "configuration cache")
        cache = jsonfast.loads(body.decode("utf-8")) if body is not None else None
    except (CmError, ValueError, RecursionError):
        return None  # unreadable, not JSON, or absurdly nested: validate instead
    if (not isinstance(cache, dict) or cache.get("digest") != _digest(raw) or cache.get("stamp") != _stamp()
            or not isinstance(cache.get("config"), dict)):
        return None
    return cache["config"]


def _remember(home: str, raw: bytes, data: dict) -> None:
    body = {"digest": _digest(raw), "stamp": _stamp(), "config": data}
    try:
        fsutil.write_atomic(cache_path(home), (jsonfast.dumps(body) + "\n").encode("utf-8"))
    except (CmError, OSError):
        pass  # a home we cannot write: the next load validates again


def default_config(home: str) -> dict:
    """The configuration an install starts from: capture on, nothing disclosed beyond user turns."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "dataRoot": default_data_root(home),
        "disclosure": {"enabled": True, "allowedScopes": ["global"], "allowedProvenance": ["user_explicit"]},
        "writableScopes": ["global"],
        "scheduler": dict(DEFAULT_SCHEDULER),
    }


class Disclosure:
    """``disclosure``, typed: what the Writer may send and what readers may see."""

    __slots__ = ("enabled", "allowed_scopes", "allowed_provenance", "max_excerpt_bytes", "max_candidate_bytes",
                 "max_total_bytes")

    def __init__(self, section: dict) -> None:
        self.enabled: bool = section["enabled"]
        self.allowed_scopes: list[str] = list(section["allowedScopes"])
        self.allowed_provenance: list[str] = list(section["allowedProvenance"])
        self.max_excerpt_bytes: int | None = section.get("maxExcerptBytes")
        self.max_candidate_bytes: int | None = section.get("maxCandidateBytes")
        self.max_total_bytes: int | None = section.get("maxTotalBytes")

    @property
    def source_cap(self) -> int | None:
        """The explicit per-source byte cap the Writer enforces (smallest configured cap), or ``None``."""
        caps = (self.max_excerpt_bytes, self.max_candidate_bytes, self.max_total_bytes)
        return min((c for c in caps if c), default=None)


class Config:
    """A validated configuration plus where it came from; typed attributes over ``data``.

    ``data`` is the file's object exactly as validated (key order kept, what ``config show`` and
    ``save`` write back); the attributes are read-only views of it.
    """

    __slots__ = ("home", "data", "exists")

    def __init__(self, home: str, data: dict, exists: bool) -> None:
        self.home = home
        self.data = data
        self.exists = exists

    @property
    def schema_version(self) -> int:
        return self.data["schemaVersion"]

    @property
    def data_root(self) -> str:
        return os.path.normpath(self.data["dataRoot"])

    @property
    def remote(self) -> dict | None:
        return self.data.get("remote")

    @property
    def disclosure(self) -> Disclosure:
        return Disclosure(self.data["disclosure"])

    @property
    def allowed_scopes(self) -> list[str]:
        return list(self.data["disclosure"]["allowedScopes"])

    @property
    def writable_scopes(self) -> list[str]:
        return list(self.data["writableScopes"])

    @property
    def scheduler(self) -> dict[str, int]:
        return self.data["scheduler"]

    @property
    def session_cache(self) -> dict:
        merged = dict(DEFAULT_SESSION_CACHE)
        merged.update(self.data.get("sessionCache", {}))
        return merged

    @property
    def spend(self) -> dict:
        """``spend`` with its defaults: the Memory Agent's caps (``cmrunner.core.spend.Caps``)."""
        merged: dict = dict(DEFAULT_SPEND)
        merged.update(self.data.get("spend", {}))
        return merged

    @property
    def max_request_bytes(self) -> int:
        """``remote.maxRequestBytes`` or its default: the largest request the Memory Agent may send,
        which also sizes a job's sources and an import's parts (``cmrunner.agentrt.budget``)."""
        return int((self.remote or {}).get("maxRequestBytes") or DEFAULT_MAX_REQUEST_BYTES)

    @property
    def trash_retention_ms(self) -> int:
        """How long a removed section stays restorable (``history.trashRetentionDays``, default 30)."""
        days = self.data.get("history", {}).get("trashRetentionDays", DEFAULT_TRASH_RETENTION_DAYS)
        return int(days) * 86_400_000

    @property
    def sync_auto_deadline_seconds(self) -> int:
        """The overall deadline of one automatic sync (``sync.autoDeadlineSeconds``, default 120)."""
        return int(self.data.get("sync", {}).get("autoDeadlineSeconds", DEFAULT_SYNC_AUTO_DEADLINE_SECONDS))


def _parse(path: str, raw: bytes) -> object:
    try:
        return jsonfast.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError("CONFIG_INVALID", f"{path} is not valid UTF-8 JSON; fix it or rerun `cm config init --force`") from None


def load(home: str) -> Config:
    """Load ``<home>/config.json`` (validated, or pre-validated by the cache); the defaults if absent."""
    path = config_path(home)
    raw = fsutil.read_regular_file(path, CONFIG_LIMIT, "config.json")
    if raw is None:
        return Config(home, default_config(home), exists=False)
    cached = _cached(home, raw)
    if cached is not None:
        return Config(home, cached, exists=True)
    data = validate(_parse(path, raw))
    _remember(home, raw, data)
    return Config(home, data, exists=True)


def save(home: str, data: dict) -> None:
    """Validate and publish ``config.json`` atomically (the home is created 0700 if needed)."""
    validate(data)
    fsutil.ensure_private_dir(home, "configuration home")
    import json  # indented output; saving is never on the hook path

    raw = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    fsutil.write_atomic(config_path(home), raw)
    # What a load of these bytes parses to (no tuples, no aliasing of the caller's objects).
    _remember(home, raw, json.loads(raw))


def keep_aside(home: str) -> str:
    """Copy the current ``config.json`` to a new ``config.json.corrupt-<UTC time>``; returns its path."""
    import time

    raw = fsutil.read_regular_file(config_path(home), CONFIG_LIMIT, "config.json")
    if raw is None:
        raise ConfigError("CONFIG_MISSING", f"{config_path(home)} disappeared; rerun `cm config init`")
    stem = f"{config_path(home)}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    for n in range(100):
        target = stem if n == 0 else f"{stem}-{n}"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            fsutil.fsync_fd(fd)
        finally:
            os.close(fd)
        fsutil.fsync_dir(home)
        return target
    raise ConfigError("CONFIG_BACKUP_FAILED", f"too many {stem}* copies exist; remove old ones and retry")
