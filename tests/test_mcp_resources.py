"""`cm mcp` read profile: resources, the template and its completion, workspace isolation, no SQLite."""

from __future__ import annotations

import os

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceTemplateReference
from mcp_support import allow, configure, error_code, register, server_env, session, structured, write_doc

from cmrunner.core import projects

TEMPLATE = "common-memory://memory/{contextId}"


def _uri(context: str) -> str:
    return "common-memory://memory/" + context.replace(":", "%3A")


async def _completions(client, value: str = "") -> list[str]:
    result = await client.complete(ResourceTemplateReference(type="ref/resource", uri=TEMPLATE),
                                   {"name": "contextId", "value": value})
    return result.completion.values


def test_resources_template_completion_and_exact_uris(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    write_doc(paths, "profile", "# Profile\n\n## Name\nAda.\n")
    write_doc(paths, project.scope, "# Project\n\n## Build\nUse make.\n")

    async def main() -> None:
        args = ["--client-id", "reader", "--capability", "read", "--global", "--workspace", project.path]
        async with session(home, args) as client:
            listed = (await client.list_resources()).resources
            assert [(r.uri, r.name, r.mime_type) for r in listed] == [
                ("common-memory://memory/global", "global", "text/markdown"),
                (_uri(project.scope), project.scope, "text/markdown")]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [TEMPLATE]
            assert await _completions(client) == ["global", project.scope]
            assert await _completions(client, "proj") == [project.scope]
            assert await _completions(client, "zzz") == []

            text = (await client.read_resource(_uri(project.scope))).contents[0].text
            read = (await client.call_tool("memory_read", {"contextId": project.scope})).content[0].text
            strip = [line for line in text.splitlines() if "common-memory-data" not in line]
            assert "Use make." in text and "Ada." not in text
            assert strip == [line for line in read.splitlines() if "common-memory-data" not in line]
            assert "Ada." in (await client.read_resource("common-memory://memory/global")).contents[0].text
            # Only the exact listed URI is served: an unencoded or guessed spelling is refused.
            for guessed in ("common-memory://memory/" + project.scope, "common-memory://memory/profile",
                            "common-memory://memory/..%2Fglobal"):
                with pytest.raises(MCPError):
                    await client.read_resource(guessed)

            projects.remove(paths, project.id)  # removed after listing: unreadable at once
            with pytest.raises(MCPError):
                await client.read_resource(_uri(project.scope))
            assert [r.name for r in (await client.list_resources()).resources] == ["global"]
            assert await _completions(client) == ["global"]

    anyio.run(main)


def test_a_process_for_workspace_a_never_reads_b_or_global(home, tmp_path):
    paths = configure(home)
    a = register(paths, str(tmp_path / "a"), "A")
    b = register(paths, str(tmp_path / "b"), "B")
    allow(home, a.scope, b.scope)
    write_doc(paths, "profile", "# Profile\n\n## Secret plan\nGLOBAL-ONLY\n")
    write_doc(paths, a.scope, "# Project\n\n## A\nA-ONLY\n")
    write_doc(paths, b.scope, "# Project\n\n## B\nB-ONLY\n")
    nested = tmp_path / "a" / "src"
    nested.mkdir()

    async def main() -> None:
        args = ["--client-id", "reader", "--capability", "read", "--workspace", str(nested)]
        async with session(home, args) as client:
            status = structured(await client.call_tool("memory_status", {}))
            assert status["contexts"] == [a.scope]
            everything = await client.call_tool("memory_read", {})
            body = everything.content[0].text + repr(everything.structured_content)
            assert "A-ONLY" in body and "B-ONLY" not in body and "GLOBAL-ONLY" not in body
            for other in (b.scope, "global"):
                assert error_code(await client.call_tool("memory_read", {"contextId": other})) == "CONTEXT_UNAVAILABLE"
                with pytest.raises(MCPError):
                    await client.read_resource(_uri(other))
            assert [r.name for r in (await client.list_resources()).resources] == [a.scope]
            assert await _completions(client) == [a.scope]
            assert await _completions(client, "g") == []

    anyio.run(main)


TRAP = """
import os, sqlite3
_connect = sqlite3.connect
def _trapped(*args, **kwargs):
    with open(os.environ["CM_SQLITE_TRAP"], "a") as handle:
        handle.write(repr(args[:1]) + "\\n")
    return _connect(*args, **kwargs)
sqlite3.connect = _trapped
"""


def test_read_profile_never_opens_sqlite(home, tmp_path):
    paths = configure(home)
    write_doc(paths, "profile", "# Profile\n\n## Name\nAda.\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TRAP)
    trap = tmp_path / "sqlite-connects.txt"
    env = server_env(home, PYTHONPATH=str(site), CM_SQLITE_TRAP=str(trap))

    async def read_everything() -> None:
        async with session(home, ["--client-id", "reader", "--capability", "read", "--global"], env) as client:
            await client.call_tool("memory_status", {})
            assert not structured(await client.call_tool("memory_read", {}))["empty"]
            assert error_code(await client.call_tool("memory_status", {"submissionId": "x"})) == "STATUS_UNAVAILABLE"
            await client.read_resource("common-memory://memory/global")
            await client.list_resources()
            await _completions(client)

    anyio.run(read_everything)
    assert not trap.exists(), trap.read_text()
    assert not os.path.exists(paths.db) and not os.path.exists(paths.runtime)

    async def relay_control() -> None:  # the trap does catch a profile that writes
        args = ["--client-id", "r", "--capability", "relay", "--global", "--accept-client-reported-user-turns"]
        async with session(home, args, env) as client:
            turn = {"submissionId": "s", "contextId": "global", "text": "hello"}
            assert structured(await client.call_tool("memory_submit_user_turn", turn))["accepted"]

    anyio.run(relay_control)
    assert "runtime.sqlite" in trap.read_text()
