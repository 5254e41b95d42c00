"""Which model ``cm eval`` tests, and the private values each temporary home gets for it.

Contract:
- ``resolve(home, choice)`` returns the ``ModelUnderTest``:
  ``--synthetic POLICY``: the project's fake model on 127.0.0.1 with that policy (a built-in name
  or any ``file.py:function`` the fake model can load), no key, labelled synthetic; otherwise a candidate (``--model``/``--base-url``/``--api``/``--api-key-env``, each
  defaulting to the user's configured ``remote``) or, with none of them, the user's ``remote`` itself
  — an agent-CLI runtime included: each world's home gets the same ``remote`` (the CLI with its own
  login, the user's environment) and no private value.
- A real model's key is read from the user's private ``.env`` only (never the shell); with it the
  values the network route reads from that file (proxy variables, cm's reserved proxy URL and CA
  file) are carried over. They are written only into each temporary home's 0600 ``.env``, which is
  deleted with that home. Nothing here prints or returns a value in a message.
- Errors: ``EVAL_OPTIONS_CONFLICT`` (``--synthetic`` with candidate options), ``UNKNOWN_POLICY``,
  ``UNCONFIGURED`` (no model configured and no candidate), ``CANDIDATE_INCOMPLETE`` (a candidate
  without a base URL or model), ``API_KEY_MISSING``.
- ``Judge`` is the optional judge model (``--judge-model`` …): its remote section and key, read
  the same way; it is only ever sent a world's resulting memory and a check's question.
"""

from __future__ import annotations

from typing import NamedTuple

from cmrunner.agentrt.netclient import PRIVATE_ROUTE_NAMES
from cmrunner.core import config as config_mod, configdefs, envfile
from cmrunner.core.errors import CmError

KEY_NAME = "COMMON_MEMORY_API_KEY"
SYNTHETIC_KEY = "synthetic-eval-key-not-a-secret"


class Choice(NamedTuple):
    """What the user asked for on the command line."""

    synthetic: str | None = None
    model: str | None = None
    base_url: str | None = None
    api: str | None = None
    api_key_env: str | None = None


class ModelUnderTest(NamedTuple):
    label: str
    policy: str | None  # the fake model's policy (synthetic), or None for a real provider
    remote: dict | None  # the remote section a temporary home gets (None: filled per world for synthetic)
    private: dict[str, str]  # private .env values a temporary home gets (the key, route values)

    @property
    def synthetic(self) -> bool:
        return self.policy is not None

    def describe(self) -> dict:
        if self.remote is None:
            return {"label": self.label, "synthetic": True, "policy": self.policy, "model": None, "baseUrl": None,
                    "api": "responses"}
        if config_mod.is_agent_cli(self.remote):
            return {"label": self.label, "synthetic": False, "policy": None, "model": self.remote.get("model"),
                    "baseUrl": None, "api": "agent-cli"}
        return {"label": self.label, "synthetic": False, "policy": None, "model": self.remote["model"],
                "baseUrl": self.remote["baseUrl"], "api": self.remote.get("api", "responses")}


def _private(home: str, remote: dict) -> dict[str, str]:
    values = envfile.read(home)
    key = values.get(remote["apiKeyEnv"]) or None
    if key is None:
        raise CmError("API_KEY_MISSING", f"{remote['apiKeyEnv']} is not set in the private .env of {home}; "
                                         "add it with `cm config init … --api-key-stdin` or name another with --api-key-env")
    carried = {name: values[name] for name in sorted(PRIVATE_ROUTE_NAMES) if name in values}
    carried[KEY_NAME] = key
    return carried


def _candidate(configured: dict | None, model: str | None, base_url: str | None, api: str | None,
               api_key_env: str | None, what: str) -> dict:
    remote = dict(configured or {})
    for field, value in (("model", model), ("baseUrl", base_url), ("api", api), ("apiKeyEnv", api_key_env)):
        if value is not None:
            remote[field] = value
    if not remote.get("baseUrl") or not remote.get("model"):
        raise CmError("CANDIDATE_INCOMPLETE", f"the {what} needs both a base URL and a model name; pass both")
    remote.setdefault("provider", "openai-compatible")
    remote.setdefault("apiKeyEnv", KEY_NAME)
    remote.setdefault("proxy", {"mode": "direct"})
    remote["apiKeySource"] = "private-env"
    return remote


def resolve(home: str, choice: Choice) -> ModelUnderTest:
    candidate = (choice.model, choice.base_url, choice.api, choice.api_key_env)
    if choice.synthetic is not None:
        if any(v is not None for v in candidate):
            raise CmError("EVAL_OPTIONS_CONFLICT", "--synthetic runs the fake model; drop --model, --base-url, --api "
                                                   "and --api-key-env, or drop --synthetic")
        from cmrunner.synthetic import fakepolicy

        try:
            fakepolicy.load_policy(choice.synthetic)
        except (ImportError, OSError, ValueError):
            raise CmError("UNKNOWN_POLICY", f"no synthetic policy {choice.synthetic!r}; use one of "
                                            + ", ".join(sorted(fakepolicy.BUILTINS)) + ", or file.py:function") from None
        return ModelUnderTest(f"SYNTHETIC policy {choice.synthetic} (cm's fake model on 127.0.0.1)",
                              choice.synthetic, None, {})
    configured = config_mod.load(home).remote
    if configured is None and all(v is None for v in candidate):
        raise CmError("UNCONFIGURED", "no model is configured; run `cm config init`, or name a candidate with "
                                      "--base-url and --model, or use --synthetic careful")
    if config_mod.is_agent_cli(configured) and all(v is None for v in candidate):
        assert configured is not None
        # Each world's home runs the same CLI, with its own login and the user's environment: no key.
        return ModelUnderTest(config_mod.runtime_label(configured), None, dict(configured), {})
    remote = _candidate(None if config_mod.is_agent_cli(configured) else configured, *candidate,
                        what="model under test")
    private = _private(home, remote)
    # The temporary home names its key with cm's own variable, whatever the user's is called.
    remote = {**remote, "apiKeyEnv": KEY_NAME}
    config_mod.validate({**config_mod.default_config(home), "remote": remote})
    return ModelUnderTest(f"{remote['model']} at {remote['baseUrl']}", None, remote, private)


def synthetic_remote(base_url: str) -> dict:
    return {"provider": "openai-compatible", "baseUrl": base_url, "model": "synthetic-eval-model",
            "apiKeyEnv": KEY_NAME, "apiKeySource": "private-env", "api": "responses", "proxy": {"mode": "direct"}}


class Judge(NamedTuple):
    remote: dict
    private: dict[str, str]  # its key (as KEY_NAME) and the route values of the private .env

    @property
    def key(self) -> str:
        return self.private[KEY_NAME]

    @property
    def label(self) -> str:
        return f"{self.remote['model']} at {self.remote['baseUrl']}"


def judge(home: str, model: str | None, base_url: str | None, api_key_env: str | None, api: str | None) -> Judge | None:
    """The judge the user named, or None (no judge: judge checks are skipped)."""
    if model is None and base_url is None:
        return None
    if model is None or base_url is None:
        raise CmError("CANDIDATE_INCOMPLETE", "the judge needs both --judge-model and --judge-base-url")
    if api is not None and api not in configdefs.APIS:
        raise CmError("EVAL_OPTIONS_CONFLICT", "--judge-api must be one of " + ", ".join(configdefs.APIS))
    remote = _candidate(None, model, base_url, api, api_key_env, what="judge")
    return Judge(remote, _private(home, remote))


def statement(model: ModelUnderTest, sessions: int, turns: int, worlds: int) -> str:
    """What will be sent where, said before anything is sent."""
    if model.synthetic:
        return (f"cm eval: {worlds} world(s) against {model.label}: no key, nothing leaves this machine; "
                "each world runs in a temporary home that is removed afterwards.")
    return (f"cm eval sends the synthetic text of {worlds} world(s) ({turns} user turns, {sessions} Memory Agent "
            f"job(s), usually a few requests each) — never your memory — to {model.label}. Each world runs in a "
            "temporary home holding a copy of your key; the home is removed afterwards.")
