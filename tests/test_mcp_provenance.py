"""MCP reads with provenance, through the SDK's own client against a real `cm mcp` after real drains:
each section's last receipt, time, client and evidence provenance; the default read is unchanged."""

from __future__ import annotations

import json
import re

import anyio
from history_support import ref, run_commits
from mcp_support import error_code, session, structured

from cmrunner.core import history
from cmrunner.core.home import DataPaths

READ = ["--client-id", "reader", "--capability", "read", "--global"]


def _last_receipt(paths: DataPaths) -> str:
    conn = history.open_read(paths)
    assert conn is not None
    try:
        [head] = [v for v in history.latest(conn, "preferences").values()]
        assert head.receipt_id is not None
        return head.receipt_id
    finally:
        conn.close()


def test_memory_read_returns_provenance_only_when_asked(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)
    with open(paths.document("preferences"), "a") as handle:
        handle.write("## Editor\nHelix.\n")  # a hand edit history has not seen yet
    receipt = _last_receipt(paths)

    async def main() -> None:
        async with session(home, READ) as client:
            plain = structured(await client.call_tool("memory_read", {}))
            assert "provenance" not in plain  # the specification's output, unchanged
            found = structured(await client.call_tool("memory_read", {"provenance": True}))
            assert found["documents"] == plain["documents"]
            by_section = {p["section"]: p for p in found["provenance"]}
            indentation = by_section["Indentation"]
            assert (indentation["target"], indentation["ref"], indentation["lastReceipt"]) == (
                "preferences", ref("Indentation"), receipt)
            assert (indentation["author"], indentation["provenance"]) == ("memory_agent", ["user_explicit"])
            assert re.fullmatch(r"codex:[0-9a-f]{12}", indentation["client"])  # the Codex integration's agent instance
            assert indentation["at"].endswith("Z")
            editor = by_section["Editor"]
            assert (editor["lastReceipt"], editor["author"], editor["provenance"]) == (None, "unknown", [])
            assert error_code(await client.call_tool("memory_read", {"provenance": "yes"})) == "INVALID_ARGUMENTS"
            contents = (await client.read_resource("common-memory://memory/global?provenance=true")).contents
            assert [c.mime_type for c in contents] == ["text/markdown", "application/json"]
            assert json.loads(contents[1].text)["provenance"] == found["provenance"]
            assert len((await client.read_resource("common-memory://memory/global")).contents) == 1

    anyio.run(main)
