"""Writing a configuration and its key: the one path behind `cm config init` and the setup wizard.

Contract:
- ``replaceable(home, force)`` is the rule for starting over: an existing ``config.json`` is
  ``CONFIG_EXISTS`` without ``force``; one that does not load (``config.UNREADABLE_CODES``) may be
  replaced only with ``force`` (the advice its error gives), and the answer is ``True`` then, so
  ``publish`` keeps a copy of it. Any other load error is raised as it is.
- ``fresh(home, …)`` is the validated configuration `cm config init` writes: the defaults, the
  options given, and a ``remote`` exactly when a base URL and a model are both given, or when an
  agent CLI is (``agent``: ``remote.provider: agent-cli``, optional ``agentPath`` and ``model``;
  no key: the CLI uses its own login). An agent with a base URL is ``CONFIG_INVALID``.
- ``publish(home, data, keys, keep_unreadable)`` validates ``data`` first (nothing is written if
  it is invalid), then stores ``keys`` (name → key) in the private ``.env``, then, when asked,
  copies the unreadable ``config.json`` aside (``config.keep_aside``; ``on_kept`` hears where at
  once, so the copy is reported even if the save then fails), then replaces
  ``config.json`` atomically (``config.save``, which also refreshes the pre-validated cache). A
  crash between steps leaves the old configuration in force; at worst a key nothing refers to.
  Returns the path of the kept copy, or ``None``.
Keys are never printed or returned.
"""

from __future__ import annotations

from collections.abc import Callable

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.errors import CmError


def replaceable(home: str, force: bool) -> bool:
    """Whether starting over must keep an unreadable ``config.json`` aside (see module contract)."""
    try:
        exists = config_mod.load(home).exists
    except CmError as exc:
        if not force or exc.code not in config_mod.UNREADABLE_CODES:
            raise
        return True
    if exists and not force:
        raise CmError("CONFIG_EXISTS", "config.json already exists; pass --force to replace it")
    return False


def fresh(home: str, *, data_root: str | None = None, base_url: str | None = None, model: str | None = None,
          api: str | None = None, preset: str | None = None, api_key_env: str = "COMMON_MEMORY_API_KEY",
          proxy_mode: str = "direct", allowed_scopes: tuple[str, ...] = (), allowed_provenance: tuple[str, ...] = (),
          writable_scopes: tuple[str, ...] = (), agent: str | None = None, agent_path: str | None = None) -> dict:
    """The configuration `cm config init` writes for these options, validated."""
    data = config_mod.default_config(home)
    if data_root:
        data["dataRoot"] = data_root
    if allowed_scopes:
        data["disclosure"]["allowedScopes"] = list(allowed_scopes)
    if allowed_provenance:
        data["disclosure"]["allowedProvenance"] = list(allowed_provenance)
    if writable_scopes:
        data["writableScopes"] = list(writable_scopes)
    if agent is not None:
        if base_url is not None:
            raise CmError("CONFIG_INVALID", "--agent runs the Memory Agent through that CLI's own login; "
                                            "drop --base-url (or drop --agent to use an API key)")
        remote_cli: dict = {"provider": "agent-cli", "agent": agent}
        if agent_path:
            remote_cli["agentPath"] = agent_path
        if model:
            remote_cli["model"] = model
        data["remote"] = remote_cli
        return config_mod.validate(data)
    if agent_path is not None:
        raise CmError("CONFIG_INVALID", "--agent-path goes with --agent claude-code|codex|gemini")
    if (base_url is None) != (model is None):
        raise CmError("CONFIG_INVALID", "--base-url and --model go together; pass both or neither")
    if base_url is not None:
        remote: dict = {"provider": "openai-compatible", "baseUrl": base_url, "model": model,
                        "apiKeyEnv": api_key_env, "apiKeySource": "private-env", "proxy": {"mode": proxy_mode}}
        if api:
            remote["api"] = api
        if preset:
            remote["preset"] = preset
        data["remote"] = remote
    return config_mod.validate(data)


def publish(home: str, data: dict, keys: dict[str, str], keep_unreadable: bool = False,
            on_kept: Callable[[str], None] | None = None) -> str | None:
    """Validate, store the keys, keep an unreadable file aside, save (see module contract)."""
    config_mod.validate(data)
    if keys:
        envfile.update(home, dict(keys))
    kept = config_mod.keep_aside(home) if keep_unreadable else None
    if kept is not None and on_kept is not None:
        on_kept(kept)
    config_mod.save(home, data)
    return kept
