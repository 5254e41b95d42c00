"""The setup wizard's offer of an agent CLI the user already has (Claude Code, Codex, Gemini CLI)
as the Memory Agent's runtime: no API key, the CLI's own login (issue 33).

Contract:
- ``offers(home, hosts)`` is one ``Offer`` per agent CLI in ``configdefs.AGENT_CLIS`` order,
  from the same discovery ``cm agents`` uses (its ``PATH`` lookup): ``binary`` is the executable
  found on ``PATH`` (``None``: not found; a configuration folder alone does not run anything, so
  it does not count) and ``install`` says what to do then. Versions are not asked here (a Node
  CLI takes seconds): ``versions(home, offers)`` answers them from ``cm agents``'s version cache
  (``agents.cached_versions``), asking only a binary the cache does not know.
- ``remote_for(offer)`` is the ``remote`` the wizard saves: ``provider: agent-cli``, ``agent``
  and ``agentPath`` (the binary found, so the drain, started with whatever ``PATH`` a host
  gives it, runs the same CLI the check ran).
- ``check(home, offer)`` runs the runtime's own check before anything is saved: the one
  ``cm network-test`` runs on an agent-CLI runtime (``nettest.run``: one confined headless run
  with a fixed synthetic task), on the configuration that would be saved, built in memory. It
  returns that report; a failed outcome is ``CmError`` with the outcome's code and a one-line
  fix. The run goes into the usage ledger like every probe (the CLI spent tokens on its login).
- ``for_init(home, data)`` is `cm config init --agent`'s check of the configuration it is about
  to write (``data``, validated, not saved): the same confined run, not recorded in the usage
  ledger (it runs before any configuration or store exists, as ``endpoint.for_init`` does); a CLI
  that is not there or does not answer is the same ``CmError``, naming ``--agent-path`` and
  ``--skip-check``, and the caller writes nothing.
- ``commit(home, offer)`` saves it: the rest of the configuration is kept, ``remote`` is
  replaced whole (an API-key model's settings do not apply to a CLI), through
  ``configinit.publish`` (validated, atomic); keys no configuration refers to any more are then
  dropped from the private ``.env``, as ``providers.commit_model`` does. ``would_change`` says
  whether it would change anything.
Nothing here reads the CLI's credentials or prints its output.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from cmrunner.core import config as config_mod, configdefs, envfile, reasons
from cmrunner.core.errors import CmError
from cmrunner.manage import configinit, providers
from cmrunner.manage.integrations import agents as agents_mod, discovery

PACKAGES = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini": "@google/gemini-cli"}
INSTALL = {agent: f"install {discovery.TITLES[agent]} (npm install -g {package}) and log in once"
           for agent, package in PACKAGES.items()}


@dataclass(frozen=True)
class Offer:
    agent: str            # remote.agent: claude-code, codex or gemini
    title: str
    binary: str | None    # found on PATH, or None
    install: str

    @property
    def found(self) -> bool:
        return self.binary is not None


def offers(hosts: Mapping[str, discovery.Host]) -> list[Offer]:
    """Each agent CLI, found or not (see module contract)."""
    found = []
    for agent in configdefs.AGENT_CLIS:
        host = hosts.get(agent)
        found.append(Offer(agent, discovery.TITLES[agent], host.binary if host is not None else None, INSTALL[agent]))
    return found


def versions(home: str, found: list[Offer]) -> dict[str, str | None]:
    """agent → the version its binary reports, from ``cm agents``'s cache where it knows it."""
    answered = agents_mod.cached_versions(home, [o.binary for o in found])
    return {o.agent: v for o, v in zip(found, answered)}


def remote_for(offer: Offer) -> dict:
    if offer.binary is None:
        raise CmError("AGENT_CLI_NOT_FOUND", f"{offer.title} was not found on PATH; {offer.install}")
    return {"provider": "agent-cli", "agent": offer.agent, "agentPath": offer.binary}


def _data(home: str, offer: Offer) -> dict:
    """The whole configuration ``commit`` would save, validated."""
    data = copy.deepcopy(config_mod.load(home).data)
    data["remote"] = remote_for(offer)
    return config_mod.validate(data)


def would_change(home: str, offer: Offer) -> bool:
    return config_mod.load(home).remote != remote_for(offer)


def check(home: str, offer: Offer) -> dict:
    """One confined run of the CLI, as `cm network-test` makes it; ``CmError`` unless it answered."""
    from cmrunner.agentrt import nettest

    report = nettest.run(config_mod.Config(home, _data(home, offer), False))
    return _passed(report, offer.title, offer.binary)


def _passed(report: dict, title: str, binary: str | None, after: str = "") -> dict:
    outcome = report.get("outcome") or {}
    if outcome.get("ok"):
        return report
    code = str(outcome.get("code") or "INVALID_RESPONSE")
    entry = reasons.explain(code)
    fix = outcome.get("remedy") or entry.dead_fix or entry.fix or "run the CLI once yourself to see what it says"
    raise CmError(code, f"{title} at {binary} did not pass the check: {entry.reason}; {fix}{after}")


def for_init(home: str, data: dict) -> dict:
    """`cm config init --agent`'s check of ``data`` before it is written (see module contract)."""
    from cmrunner.agentrt.agentcli import probe

    remote = data["remote"]
    title = discovery.TITLES[remote["agent"]]
    report = probe.run(config_mod.Config(home, data, False), record=False)
    if (report.get("outcome") or {}).get("code") == "AGENT_CLI_NOT_FOUND":
        where = f"at {remote['agentPath']}" if remote.get("agentPath") else "on PATH"
        raise CmError("AGENT_CLI_NOT_FOUND", f"{title} was not found {where}; {INSTALL[remote['agent']]}, or pass "
                                             "--agent-path (nothing was written)")
    return _passed(report, title, report.get("binary"),
                   " (nothing was written; --skip-check saves without checking)")


def commit(home: str, offer: Offer) -> dict:
    """Save the agent CLI as the Memory Agent's runtime (see module contract). Returns the new config."""
    data = _data(home, offer)
    configinit.publish(home, data, {})
    stale = [name for name in envfile.read(home) if name.startswith(providers.KEY_PREFIX)]
    if stale:
        envfile.update(home, {name: None for name in stale})
    return data
