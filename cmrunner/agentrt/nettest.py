"""``cm network-test``: one small synthetic model request over the configured route.

Contract:
- Reads ``config.json`` and the private ``.env``; never reads or writes memory and sends no user
  content — the request is a fixed one-line prompt with a small output cap, over the same client
  (route, CA, timeouts) the Memory Agent uses. The request goes into the disclosure ledger
  (``runtime.sqlite``) like every model request, with an empty grant; the spend caps do not
  apply to this one probe.
- ``run(cfg)`` returns ``{model, api, baseUrl, route, outcome}``: ``route`` is
  ``Route.describe()`` (mode, direct or proxy, the reason, the proxy's scheme/host/port without
  credentials); ``outcome`` is ``{ok: true, elapsedMs, usage}`` or ``{ok: false, code, stage,
  reason, retryable, httpStatus?, proxyStatus?, remedy}``: ``remedy`` is the fix that matches the
  failure (``reasons.provider_fix``: the URL's API path on a 404, the key on 401/403, the model
  list for an unknown model), else the code's fix. No provider body or secret appears in it.
- On an agent-CLI runtime (``remote.provider: "agent-cli"``) it is ``agentcli.probe.run``: one
  confined run of the CLI, reported as ``{runtime, agent, model, binary, version, outcome}``.
- Without a model or its key it raises ``CmError`` (``UNCONFIGURED`` / ``API_KEY_MISSING``).
Decision: the probe caps output at 16 tokens; a reply cut by that cap still proves the route, the
key and the protocol, so it counts as success.
"""

from __future__ import annotations

import os
import time

from cmrunner.agentrt import wire
from cmrunner.agentrt.agent import send, serialize
from cmrunner.agentrt.interface import AgentError
from cmrunner.agentrt.meter import Grant, Meter
from cmrunner.agentrt.netclient import ModelClient, NetworkInputs
from cmrunner.core import config as config_mod, envfile, ledger, reasons, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

PROBE_SYSTEM = "This is a connectivity test from cm. Answer with one word."
PROBE_USER = "Reply with the word OK."
PROBE_OUTPUT_TOKENS = 16
PROBE_DEADLINE_SECONDS = 60.0
PROBE_GRANT = Grant((), ())  # the probe carries no memory and no user text


def _table_fix(code: str) -> str:
    """The code's fix from ``reasons``, unless it is "cm tries again", which a one-off probe does not."""
    entry = reasons.explain(code)
    return "" if entry.action == reasons.AUTO else entry.fix


def run(cfg: config_mod.Config, **timeouts: float) -> dict:
    remote = cfg.remote
    if not remote:
        raise CmError("UNCONFIGURED", "no model is configured; run `cm config init` with --base-url and --model")
    if config_mod.is_agent_cli(remote):
        from cmrunner.agentrt.agentcli import probe as agent_probe

        return agent_probe.run(cfg)
    private = envfile.read(cfg.home)
    key = private.get(remote["apiKeyEnv"]) or None
    if key is None:
        raise CmError("API_KEY_MISSING", f"{remote['apiKeyEnv']} is not set in the private .env; "
                                         "run `cm config init … --api-key-stdin`")
    client = ModelClient(NetworkInputs.capture(remote, private, os.environ), key, **timeouts)
    probe = dict(remote, maxOutputTokens=PROBE_OUTPUT_TOKENS)
    conv = wire.conversation(probe, PROBE_SYSTEM, [], PROBE_USER)
    report: dict = {"model": remote["model"], "api": remote.get("api", "responses"),
                    "baseUrl": remote["baseUrl"], "route": None}
    conn = store.open_store(DataPaths(cfg.data_root))
    meter = Meter.unmetered(conn, ledger.NETWORK_TEST, remote, PROBE_GRANT)
    started = time.monotonic()
    try:
        report["route"] = client.route.describe()
        # The ledger keeps the probe like every model request, answered or not (agent.send).
        turn = send(client, conv, serialize(conv.body()), started + PROBE_DEADLINE_SECONDS, meter, 1)
        report["outcome"] = {"ok": True, "elapsedMs": int((time.monotonic() - started) * 1000), "usage": turn.usage}
    except AgentError as exc:
        report["outcome"] = {"ok": False, "code": exc.code, **exc.diagnostic,
                             "remedy": reasons.provider_fix(exc.code, exc.diagnostic, remote["baseUrl"])
                             or _table_fix(exc.code)}
    finally:
        client.close()
        conn.close()
    return report
