"""Helpers for MCP tests: a configured home, and the SDK's own client against a real ``cm mcp``.

Every session launches the installed ``cm mcp`` console script as a subprocess through
``mcp.client.stdio`` (the SDK passes only the environment given here), so the tests exercise the
real stdio wire, the real argument parsing and the real shutdown.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from conftest import CM
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths

ALL_PROVENANCE = ["user_explicit", "agent_observation", "document_import"]


def configure(home: str, scopes: list[str] | None = None, provenance: list[str] | None = None,
              **disclosure: object) -> DataPaths:
    data = config_mod.default_config(home)
    data["disclosure"]["allowedScopes"] = scopes or ["global"]
    data["disclosure"]["allowedProvenance"] = provenance or list(ALL_PROVENANCE)
    data["disclosure"].update(disclosure)
    data["writableScopes"] = list(scopes or ["global"])
    config_mod.save(home, data)
    return DataPaths(config_mod.load(home).data_root)


def register(paths: DataPaths, path: str, name: str) -> projects.Project:
    os.makedirs(path, exist_ok=True)
    return projects.register(paths, path, name)


def allow(home: str, *scopes: str) -> None:
    cfg = config_mod.load(home)
    data = cfg.data
    data["disclosure"]["allowedScopes"] = list(dict.fromkeys(data["disclosure"]["allowedScopes"] + list(scopes)))
    data["writableScopes"] = list(dict.fromkeys(data["writableScopes"] + list(scopes)))
    config_mod.save(home, data)


def write_doc(paths: DataPaths, target: str, text: str) -> None:
    path = paths.document(target)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def server_env(home: str, **extra: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update({"COMMON_MEMORY_HOME": home, "CM_TEST_DRAIN_LINGER_MS": "0"})
    env.update(extra)
    return env


@asynccontextmanager
async def session(home: str, args: list[str], env: dict[str, str] | None = None,
                  mode: str = "legacy") -> AsyncIterator[Client]:
    """A connected SDK client talking to ``cm mcp <args>`` over stdio."""
    params = StdioServerParameters(command=CM, args=["mcp", *args], env=env or server_env(home))
    async with Client(params, mode=mode) as client:
        yield client


def structured(result: object) -> dict:
    assert result.structured_content is not None, result
    return result.structured_content


def error_code(result: object) -> str:
    assert result.is_error, result
    body = result.structured_content
    assert set(body) == {"code", "message"}, body
    assert result.content[0].text.startswith(body["code"] + ": ")
    return body["code"]


def rows(paths: DataPaths, sql: str, params: tuple = ()) -> list[tuple]:
    import sqlite3

    if not os.path.exists(paths.db):
        return []
    conn = sqlite3.connect(f"file:{paths.db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def wait_for(predicate, timeout: float = 15.0) -> None:
    """Poll ``predicate``; the deadline only bounds a hang (it is no window the work must fit)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def script_file(tmp: str, decisions: list) -> str:
    path = os.path.join(tmp, "agent-script.json")
    with open(path, "w") as handle:
        json.dump({"decisions": decisions}, handle)
    return path


def retain_template(title: str, target: str = "profile", applicability: str = "global") -> list[dict]:
    """A scripted decision appending one Section built from ``title`` (``{first}`` is the observation id)."""
    return [{"kind": "retain", "applicability": applicability, "confidence": 0.9, "evidence": "$EVIDENCE",
             "reason": "r", "admission": "remember", "lifetime": "stable",
             "operations": [{"op": "put_section", "target": target, "section": None, "title": title,
                             "body": "kept from observation {first}\n"}]}]
