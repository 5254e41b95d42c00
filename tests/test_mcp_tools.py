"""`cm mcp` tools through the SDK's own client against the real stdio subprocess: every tool, every code."""

from __future__ import annotations

import json
import os
from importlib.metadata import version

import anyio
from conftest import run_cm
from mcp_support import (
    allow,
    configure,
    error_code,
    register,
    retain_template,
    rows,
    script_file,
    server_env,
    session,
    structured,
    wait_for,
    write_doc,
)

READ = ["--client-id", "codex-cli", "--capability", "read", "--global"]
RELAY = ["--client-id", "relay-1", "--capability", "relay", "--global", "--accept-client-reported-user-turns"]
INIT = ["--client-id", "chatgpt-desktop", "--capability", "init", "--global"]


def test_read_profile_tools_schemas_identity_and_reads(home):
    paths = configure(home)
    write_doc(paths, "profile", "# Profile\n\n## Name\nThe user is called Ada.\n")
    write_doc(paths, "preferences", "# Preferences\n")

    async def main() -> None:
        async with session(home, READ) as client:
            assert client.server_info.name == "common-memory"
            assert client.server_info.version == version("common-memory-cm")
            assert "memory_read" in client.instructions and "memory_submit_user_turn" not in client.instructions
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"memory_read", "memory_status"}
            for tool in tools.values():
                assert tool.title and tool.description and tool.output_schema
                assert tool.input_schema["additionalProperties"] is False
                assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
            assert tools["memory_read"].input_schema["properties"]["contextId"]["pattern"]

            status = structured(await client.call_tool("memory_status", {}))
            assert status["capabilities"] == ["read"] and status["contexts"] == ["global"]
            assert (status["readEnabled"], status["submissionEnabled"], status["initEnabled"]) == (True, False, False)
            assert status["limits"] == {"maxInputBytes": None, "maxMessageBytes": 1048576}
            assert status["next"]["action"] == "read" and status["next"]["tool"] == "memory_read"

            result = await client.call_tool("memory_read", {})
            read = structured(result)
            assert read["contexts"] == ["global"] and read["empty"] is False and "guidance" not in read
            docs = {d["target"]: d for d in read["documents"]}
            assert docs["profile"]["empty"] is False and "Ada" in docs["profile"]["content"]
            assert docs["profile"]["bytes"] == len(docs["profile"]["content"].encode())
            assert docs["preferences"] == {"target": "preferences", "content": "# Preferences\n", "bytes": 14,
                                           "empty": True}
            text = result.content[0].text
            assert "Ada" in text and "not\ninstructions" in text and "[document: preferences]" not in text
            assert structured(await client.call_tool("memory_read", {"contextId": "global"}))["contexts"] == ["global"]

            assert error_code(await client.call_tool("memory_read", {"contextId": "project:nope"})) == "CONTEXT_UNAVAILABLE"
            assert error_code(await client.call_tool("memory_read", {"contextId": "../etc"})) == "CONTEXT_UNAVAILABLE"
            assert error_code(await client.call_tool("memory_read", {"capability": "relay"})) == "INVALID_ARGUMENTS"
            assert error_code(await client.call_tool("memory_status", {"submissionId": "s1"})) == "STATUS_UNAVAILABLE"
            assert error_code(await client.call_tool("memory_status", {"importId": "i1"})) == "STATUS_UNAVAILABLE"
            assert error_code(await client.call_tool("memory_status", {"importId": "i", "submissionId": "s"})) \
                == "INVALID_SUBMISSION_ID"
            # Capabilities are fixed at launch: the write tools do not exist in this process.
            refused = await client.call_tool("memory_submit_user_turn",
                                             {"submissionId": "s", "contextId": "global", "text": "hi"})
            assert refused.is_error

    anyio.run(main)
    assert not os.path.exists(paths.db)


def test_empty_memory_and_read_disabled(home):
    configure(home)

    async def main() -> None:
        async with session(home, READ, mode="auto") as client:  # the 2026 discovery path as well
            read = structured(await client.call_tool("memory_read", {}))
            assert read["empty"] is True and read["guidance"].startswith("Nothing is stored")
            assert [d["empty"] for d in read["documents"]] == [True, True]
        async with session(home, ["--capability", "read"]) as client:  # no --global: no context at all
            status = structured(await client.call_tool("memory_status", {}))
            assert status["contexts"] == [] and status["readEnabled"] is False
            assert status["next"]["action"] == "review"
            assert error_code(await client.call_tool("memory_read", {})) == "READ_DISABLED"

    anyio.run(main)


def test_relay_accepts_durably_and_reports_processing(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    env = server_env(home, CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("Fact {first}")]))

    async def main() -> None:
        args = RELAY + ["--workspace", project.path]
        async with session(home, args, env) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"memory_submit_user_turn", "memory_status"}
            hints = tools["memory_submit_user_turn"].annotations
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) \
                == (False, True, True, True)
            assert "verbatim" in client.instructions
            status = structured(await client.call_tool("memory_status", {}))
            assert status["submissionEnabled"] is True and status["contexts"] == ["global", project.scope]

            turn = {"submissionId": "s-1", "contextId": "global", "text": "I prefer tea over coffee."}
            accepted = structured(await client.call_tool("memory_submit_user_turn", turn))
            assert accepted["accepted"] is True and accepted["duplicate"] is False
            assert accepted["contextId"] == "global" and accepted["state"] in ("pending", "claimed", "processed")
            if accepted["state"] == "pending":
                assert accepted["next"] == {"action": "poll", "tool": "memory_status",
                                            "arguments": {"submissionId": "s-1"}, "retryAfterMs": 2000,
                                            "message": accepted["next"]["message"]}
            again = structured(await client.call_tool("memory_submit_user_turn", turn))
            assert again["duplicate"] is True and again["taskId"] == accepted["taskId"]
            changed = dict(turn, text="I prefer coffee.")
            assert error_code(await client.call_tool("memory_submit_user_turn", changed)) == "SUBMISSION_CONFLICT"
            moved = dict(turn, contextId=project.scope)
            assert error_code(await client.call_tool("memory_submit_user_turn", moved)) == "SUBMISSION_CONFLICT"
            # The same submission id inside a conversation is another item.
            threaded = dict(turn, conversationId="c-1", text="Call me Ada.")
            assert structured(await client.call_tool("memory_submit_user_turn", threaded))["duplicate"] is False

            def processed() -> bool:
                return all(r[0] == "processed" for r in rows(paths, "SELECT state FROM observations")) and \
                    len(rows(paths, "SELECT 1 FROM observations")) == 2

            await anyio.to_thread.run_sync(wait_for, processed)
            item = structured(await client.call_tool("memory_status", {"submissionId": "s-1"}))
            outcome = item["submission"]
            assert outcome["state"] == "processed" and outcome["retainedIn"] == ["profile"]
            assert outcome["jobState"] == "done" and outcome["attempts"] == 1 and outcome["retryAt"] is None
            assert outcome["issue"] is None and outcome["diagnostic"] is None
            assert item["next"]["action"] == "review"  # a relay connection cannot read the destination
            other = structured(await client.call_tool("memory_status", {"submissionId": "s-1", "conversationId": "c-1"}))
            assert other["submission"]["state"] == "processed"
            unknown = structured(await client.call_tool("memory_status", {"submissionId": "never"}))
            assert unknown["submission"] is None and unknown["next"]["action"] == "correct"
            assert error_code(await client.call_tool("memory_status", {"importId": "x"})) == "STATUS_UNAVAILABLE"

    anyio.run(main)
    stored = rows(paths, "SELECT namespace, entry_id, source, scope, text FROM observations ORDER BY id")
    assert stored[0] == ('mcp:["relay-1",["submission","s-1"]]', "s-1", "mcp_user_submission", "global",
                         "I prefer tea over coffee.")
    assert stored[1][0] == 'mcp:["relay-1",["conversation","c-1"]]'


def test_relay_refusals_queue_nothing(home):
    paths = configure(home, maxTotalBytes=64)

    async def main() -> None:
        async with session(home, ["--client-id", "r", "--global"]) as client:  # relay by default, no trust flag
            status = structured(await client.call_tool("memory_status", {}))
            assert status["capabilities"] == ["relay"] and status["submissionEnabled"] is False
            assert status["limits"] == {"maxInputBytes": 64, "maxMessageBytes": 1048576, "maxSourceBytes": 32}
            turn = {"submissionId": "s", "contextId": "global", "text": "hello"}
            assert error_code(await client.call_tool("memory_submit_user_turn", turn)) == "SUBMISSION_DISABLED"
        async with session(home, RELAY) as client:
            cases = {
                "INVALID_SUBMISSION_ID": {"submissionId": "has space", "contextId": "global", "text": "x"},
                "CONTEXT_UNAVAILABLE": {"submissionId": "s", "contextId": "project:other", "text": "x"},
                "INVALID_TEXT_SIZE": {"submissionId": "s", "contextId": "global", "text": "   "},
                "INVALID_ARGUMENTS": {"submissionId": "s", "contextId": "global", "text": "x", "scope": "all"},
                "SENSITIVE_CONTENT_REJECTED": {"submissionId": "s", "contextId": "global",
                                               "text": "my password: hunter2xyz"},
            }
            for code, args in cases.items():
                result = await client.call_tool("memory_submit_user_turn", args)
                assert error_code(result) == code
                assert "hunter2" not in result.content[0].text
            too_long = {"submissionId": "s", "contextId": "global", "text": "é" * 17}  # 34 bytes > 64 - 32 framing
            assert error_code(await client.call_tool("memory_submit_user_turn", too_long)) == "INVALID_TEXT_SIZE"
            missing = {"submissionId": "s", "contextId": "global"}
            assert error_code(await client.call_tool("memory_submit_user_turn", missing)) == "INVALID_TEXT_SIZE"

    anyio.run(main)
    assert rows(paths, "SELECT COUNT(*) FROM observations") in ([], [(0,)])
    configure(home, provenance=["agent_observation"])

    async def without_user_explicit() -> None:
        async with session(home, RELAY) as client:
            turn = {"submissionId": "s", "contextId": "global", "text": "hello"}
            assert error_code(await client.call_tool("memory_submit_user_turn", turn)) == "SUBMISSION_DISABLED"

    anyio.run(without_user_explicit)


def test_init_import_flow_and_codes(home, tmp_path):
    paths = configure(home)
    env = server_env(home, CM_TEST_AGENT_SCRIPT=script_file(
        str(tmp_path), [retain_template("Imported from chatgpt-desktop {first}")]))
    payload = {"importId": "imp-1", "contextId": "global", "sourceLabel": "chatgpt-desktop",
               "basis": "saved_memories", "understanding": "The user studies Rust on weekends.",
               "gaps": "No access to chat history."}

    async def main() -> None:
        async with session(home, INIT, env) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"memory_init", "memory_status"}
            assert "memory_init" in client.instructions
            accepted = structured(await client.call_tool("memory_init", payload))
            assert accepted["accepted"] is True and accepted["duplicate"] is False
            assert structured(await client.call_tool("memory_init", payload))["duplicate"] is True
            changed = dict(payload, understanding="Something else.")
            assert error_code(await client.call_tool("memory_init", changed)) == "SUBMISSION_CONFLICT"
            for code, bad in (("INVALID_IMPORT_LABEL", {"sourceLabel": " leading space"}),
                              ("INVALID_IMPORT_LABEL", {"sourceLabel": "x" * 65}),
                              ("INVALID_IMPORT_BASIS", {"basis": "rumours"}),
                              ("INVALID_TEXT_SIZE", {"understanding": ""}),
                              ("INVALID_SUBMISSION_ID", {"importId": "a/b"}),
                              ("CONTEXT_UNAVAILABLE", {"contextId": "project:x"}),
                              ("SENSITIVE_CONTENT_REJECTED", {"understanding": "api_key = sk-proj-Ab3dEf6hIj9kLm2nOp5q"})):
                assert error_code(await client.call_tool("memory_init", {**payload, "importId": "imp-2", **bad})) == code
            assert error_code(await client.call_tool("memory_status", {"submissionId": "s"})) == "STATUS_UNAVAILABLE"

            def processed() -> bool:
                return rows(paths, "SELECT state FROM observations") == [("processed",)]

            await anyio.to_thread.run_sync(wait_for, processed)
            item = structured(await client.call_tool("memory_status", {"importId": "imp-1"}))
            assert item["import"]["state"] == "processed" and item["import"]["retainedIn"] == ["profile"]
            assert item["next"]["action"] == "review"

    anyio.run(main)
    (namespace, text, source), = rows(paths, "SELECT namespace, text, source FROM observations")
    assert namespace == 'mcp-init:["chatgpt-desktop","imp-1"]' and source == "agent_import"
    assert list(json.loads(text)) == ["kind", "sourceLabel", "basis", "understanding", "gaps"]
    assert "Imported from chatgpt-desktop" in open(paths.document("profile")).read()


def test_init_disabled_without_agent_observation(home):
    configure(home, provenance=["user_explicit"])

    async def main() -> None:
        async with session(home, INIT) as client:
            assert structured(await client.call_tool("memory_status", {}))["initEnabled"] is False
            payload = {"importId": "i", "contextId": "global", "sourceLabel": "x", "basis": "unknown",
                       "understanding": "u"}
            assert error_code(await client.call_tool("memory_init", payload)) == "INIT_DISABLED"

    anyio.run(main)


def test_access_narrows_after_launch_but_never_widens(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "a"), "A")
    write_doc(paths, project.scope, "# Project\n\n## Build\nUse make.\n")

    async def main() -> None:
        async with session(home, READ + ["--workspace", project.path]) as client:
            assert structured(await client.call_tool("memory_status", {}))["contexts"] == ["global"]
            allow(home, project.scope)  # allowed only after launch: not added to this connection
            assert structured(await client.call_tool("memory_status", {}))["contexts"] == ["global"]
            configure(home, scopes=[project.scope])  # global withdrawn: gone at once
            assert structured(await client.call_tool("memory_status", {}))["contexts"] == []
            assert error_code(await client.call_tool("memory_read", {"contextId": "global"})) == "READ_DISABLED"
            with open(os.path.join(home, "config.json"), "w") as handle:
                handle.write("{broken")
            assert error_code(await client.call_tool("memory_status", {})) == "MEMORY_UNAVAILABLE"

    anyio.run(main)


def test_launch_refusals(home, tmp_path):
    paths = configure(home)
    register(paths, str(tmp_path / "p"), "P")
    cases = {
        "CLIENT_ID_REQUIRED": ["mcp", "--capability", "init"],
        "INVALID_CLIENT_ID": ["mcp", "--client-id", "a b", "--capability", "read"],
        "INVALID_WORKSPACE_PATH": ["mcp", "--capability", "read", "--workspace", "C:\\Users\\me\\p"],
        "UNREGISTERED_WORKSPACE": ["mcp", "--capability", "read", "--workspace", str(tmp_path)],
    }
    for code, args in cases.items():
        proc = run_cm(args)
        assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: "), (code, proc.stderr)
        assert proc.stdout == b""
    assert run_cm(["mcp", "--capability", "write"]).returncode == 2
