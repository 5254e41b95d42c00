"""`cm mcp`'s stdio wire (``cmrunner/mcpserver/wire.py``): every bad line gets a JSON-RPC answer.

A real ``cm mcp`` subprocess receives each class of bad line raw; the answer (code, id, cm's code
in ``error.data``, no user text) must arrive, and the next valid request must still be served.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading

import pytest
from conftest import CM
from mcp_support import configure, rows, server_env

from cmrunner.mcpserver import wire

RELAY = ["--client-id", "relay-1", "--capability", "relay", "--global", "--accept-client-reported-user-turns"]
SECRET = "user-words-xyzzy"  # user text in every bad line: never in an answer
ANSWER_WAIT = 30.0  # a hang guard (the old server never answered), not a speed assertion


class Server:
    """A raw-wire ``cm mcp`` session: lines in, answers out (read on a thread, so a missing answer fails)."""

    def __init__(self, home: str, args: list[str]) -> None:
        self.proc = subprocess.Popen([CM, "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=server_env(home))
        self.answers: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 100

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.answers.put(line)

    def send(self, raw: bytes) -> None:
        self.proc.stdin.write(raw + b"\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def answer(self) -> dict:
        try:
            line = self.answers.get(timeout=ANSWER_WAIT)
        except queue.Empty:
            pytest.fail("cm mcp gave no answer")
        assert line.endswith(b"\n")
        return json.loads(line)

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode())
        reply = self.answer()
        assert reply["id"] == self.next_id and "result" in reply, reply
        return reply["result"]

    def initialize(self) -> None:
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "wire-test", "version": "0"}})
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def still_serving(self) -> None:
        result = self.request("tools/call", {"name": "memory_status", "arguments": {}})
        assert result["structuredContent"]["next"], result

    def close(self) -> tuple[int, str]:
        self.proc.stdin.close()  # type: ignore[union-attr]
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read().decode("utf-8", "replace")  # type: ignore[union-attr]


def _call(request_id: int | str, arguments: str) -> bytes:
    """A ``tools/call`` of memory_submit_user_turn whose arguments object is the raw JSON given."""
    return ('{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"method":"tools/call","params":'
            '{"name":"memory_submit_user_turn","arguments":' + arguments + "}}").encode()


GOOD_ARGS = '"submissionId":"s1","contextId":"global"'
# (line, JSON-RPC code, answered id, cm code, field)
BAD_LINES = [
    (_call(11, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","n":NaN}'), -32700, 11, "INVALID_ARGUMENTS",
     "params.arguments.n"),
    (_call(12, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","n":Infinity}'), -32700, 12, "INVALID_ARGUMENTS",
     "params.arguments.n"),
    (_call(13, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","n":-Infinity}'), -32700, 13, "INVALID_ARGUMENTS",
     "params.arguments.n"),
    (_call(14, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","n":1e400}'), -32700, 14, "INVALID_ARGUMENTS",
     "params.arguments.n"),
    (_call(15, '{' + GOOD_ARGS + ',"text":"' + SECRET + '\\udbff"}'), -32700, 15, "INVALID_TEXT", "params.arguments.text"),
    (_call(16, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","deep":' + "[" * 150 + "]" * 150 + "}"), -32700, 16,
     "INPUT_TOO_DEEP", "params.arguments.deep"),
    # too deep for the parser itself to finish: no id can be read
    (_call(17, '{' + GOOD_ARGS + ',"text":"' + SECRET + '","deep":' + "[" * 5000 + "]" * 5000 + "}"), -32700, None,
     "INPUT_TOO_DEEP", ""),
    (_call("s-18", '{' + GOOD_ARGS + ',"text":"' + SECRET + '"'), -32700, None, "INVALID_MCP_INPUT", ""),  # truncated
    (b'{"text":"' + SECRET.encode() + b'"} trailing', -32700, None, "INVALID_MCP_INPUT", ""),
    (b"\xef\xbb\xbf" + _call(19, '{}'), -32700, None, "INVALID_MCP_INPUT", ""),  # a BOM is not JSON
    (b'{"jsonrpc":"2.0","id":20,"method":"ping","params":{"t":"\xff' + SECRET.encode() + b'"}}', -32700, None,
     "INVALID_ENCODING", ""),
    # a lone surrogate in the id: the id cannot be echoed
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', -32700, None, "INVALID_TEXT", "id"),
    # a repeated top-level key: which id would it be?
    (b'{"jsonrpc":"2.0","id":21,"id":22,"method":"ping"}', -32700, None, "INVALID_MCP_INPUT", ""),
    # strict JSON, not a JSON-RPC message
    (b'["' + SECRET.encode() + b'"]', -32600, None, "INVALID_MCP_INPUT", ""),
    (b"[]", -32600, None, "INVALID_MCP_INPUT", ""),
    (b"42", -32600, None, "INVALID_MCP_INPUT", ""),
    (b'{"jsonrpc":"2.0","id":23,"method":5}', -32600, 23, "INVALID_MCP_INPUT", ""),
    (b'{"jsonrpc":"1.0","id":"s-24","method":"ping"}', -32600, "s-24", "INVALID_MCP_INPUT", ""),
    # an id that is no string or integer: the SDK would take the request for a notification
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None, "INVALID_MCP_INPUT", "id"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None, "INVALID_MCP_INPUT", "id"),
    # a number that is no integer is JSON-RPC's but not MCP's: refused under the id as sent
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, 1.5, "INVALID_MCP_INPUT", "id"),
    (b'{"jsonrpc":"2.0","id":25,"method":"ping","params":"' + SECRET.encode() + b'"}', -32600, 25,
     "INVALID_MCP_INPUT", ""),
    # a malformed response: its id is the server's own and is not echoed
    (b'{"jsonrpc":"2.0","id":26,"result":5}', -32600, None, "INVALID_MCP_INPUT", ""),
    # notifications that are not strict JSON or not JSON-RPC: answered too, with id null
    (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":NaN}}', -32700, None,
     "INVALID_MCP_INPUT", "params.progress"),
    (b'{"jsonrpc":"2.0","method":7}', -32600, None, "INVALID_MCP_INPUT", ""),
]


def _check_answer(answer: dict, rpc_code: int, request_id: object, code: str, field: str, case: int = -1) -> None:
    seen = (case, answer)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id, seen
    error = answer["error"]
    assert error["code"] == rpc_code, seen
    assert error["data"] == {"code": code, "field": field}, seen
    assert error["message"].startswith(code + ": ") and "\n" not in error["message"], seen
    assert SECRET not in json.dumps(answer), seen


def test_every_bad_line_is_answered_and_the_server_keeps_serving(home):
    paths = configure(home)
    server = Server(home, RELAY)
    try:
        server.initialize()
        for n, (line, rpc_code, request_id, code, field) in enumerate(BAD_LINES):
            server.send(line)
            _check_answer(server.answer(), rpc_code, request_id, code, field, n)
            server.still_serving()
        # A NUL is strict JSON: the line reaches the tool, whose own check names the argument.
        server.send(_call(90, '{' + GOOD_ARGS + ',"text":"' + SECRET + '\\u0000"}'))
        reply = server.answer()
        assert reply["id"] == 90 and reply["result"]["isError"] is True, reply
        assert reply["result"]["structuredContent"]["code"] == "INVALID_ARGUMENTS", reply
        # Blank lines are no messages: nothing is answered for them, and serving goes on.
        server.send(b"")
        server.send(b" \t\r")
        server.still_serving()
    finally:
        code, err = server.close()
    assert code == 0 and "Traceback" not in err and SECRET not in err, err
    assert rows(paths, "SELECT COUNT(*) FROM observations") in ([], [(0,)])


def test_a_number_id_is_answered_under_the_number_the_host_sent(home):
    """JSON-RPC allows any number as an id, MCP only strings and integers: the request is refused,
    but under its own id, or the host waits for an answer that never comes (it got id null)."""
    configure(home)
    server = Server(home, RELAY)
    try:
        server.initialize()
        for raw_id, sent in ((b"1.0", b'"id":1.0,'), (b"2.5", b'"id":2.5,'), (b"30E-1", b'"id":3.0,'),
                             (b"-4.25e2", b'"id":-425.0,')):
            server.send(b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"tools/call","params":{"name":'
                        b'"memory_status","arguments":{}}}')
            line = server.answers.get(timeout=ANSWER_WAIT)
            assert sent in line, (raw_id, line)
            answer = json.loads(line)
            assert isinstance(answer["id"], float), answer  # 1.0, not the integer 1 another request may hold
            _check_answer(answer, -32600, float(raw_id), "INVALID_MCP_INPUT", "id")
            assert "string or an integer" in answer["error"]["message"]
            server.still_serving()
    finally:
        code, err = server.close()
    assert code == 0 and "Traceback" not in err and "Warning" not in err, err


def test_a_request_with_a_duplicate_key_is_refused_not_last_wins(home):
    paths = configure(home)
    server = Server(home, RELAY)
    try:
        server.initialize()
        # Today's SDK parser would keep the last "text" and accept the turn.
        server.send(_call(31, '{' + GOOD_ARGS + ',"text":"first","text":"' + SECRET + '"}'))
        _check_answer(server.answer(), -32700, 31, "INVALID_ARGUMENTS", "params.arguments")
        server.send(_call(32, '{' + GOOD_ARGS + ',"text":"x","params":{"a":1,"a":2}}'))
        _check_answer(server.answer(), -32700, 32, "INVALID_ARGUMENTS", "params.arguments.params")
        # The same submission without the repeat is accepted: the refusal admitted nothing.
        server.send(_call(33, '{' + GOOD_ARGS + ',"text":"I use helix"}'))
        reply = server.answer()
        assert reply["id"] == 33 and reply["result"]["structuredContent"]["duplicate"] is False, reply
    finally:
        code, err = server.close()
    assert code == 0, err
    assert rows(paths, "SELECT text FROM observations") == [("I use helix",)]


def test_an_oversized_line_is_answered_without_buffering_it_and_a_large_valid_one_passes(home):
    configure(home)
    server = Server(home, RELAY)
    try:
        server.initialize()
        over = _call(41, '{' + GOOD_ARGS + ',"text":"' + "x" * wire.MAX_LINE_BYTES + '"}')
        server.send(over)
        _check_answer(server.answer(), -32700, None, "INPUT_TOO_LARGE", "")
        server.still_serving()
        # Just under the cap the line reaches the tool, which answers with its own code.
        filler = "y" * (wire.MAX_LINE_BYTES - 200)
        line = ('{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"memory_status",'
                '"arguments":{"extra":"' + filler + '"}}}').encode()
        assert len(line) <= wire.MAX_LINE_BYTES
        server.send(line)
        reply = server.answer()
        assert reply["id"] == 42 and reply["result"]["isError"] is True, str(reply)[:300]
        assert reply["result"]["structuredContent"]["code"] == "INVALID_ARGUMENTS"
    finally:
        code, err = server.close()
    assert code == 0, err


def test_the_wire_stays_private_while_serving(home):
    """fd 0 reads /dev/null and fd 1 goes to stderr while serving (what the SDK's transport did)."""
    configure(home)
    server = Server(home, RELAY)
    try:
        server.initialize()
        fds = f"/proc/{server.proc.pid}/fd"
        assert os.readlink(f"{fds}/0") == "/dev/null"
        assert os.readlink(f"{fds}/1") == os.readlink(f"{fds}/2")
        server.still_serving()
    finally:
        code, err = server.close()
    assert code == 0, err


@pytest.mark.parametrize("chunks, expected", [
    ([b'{"a":1}\n{"b"', b':2}\n'], [b'{"a":1}', b'{"b":2}']),
    ([b"x" * 10, b"y" * (wire.MAX_LINE_BYTES - 5), b"zz\nok\n"], [None, b"ok"]),
    ([b"x" * (wire.MAX_LINE_BYTES + 1), b"still the long line", b"\n", b"next\n"], [None, b"next"]),
    ([b"x" * wire.MAX_LINE_BYTES + b"\n"], [b"x" * wire.MAX_LINE_BYTES]),
])
def test_lines_split_across_chunks_and_a_long_line_is_skipped_to_its_newline(chunks, expected):
    pending = bytearray()
    skipping = False
    found: list[bytes | None] = []
    for chunk in chunks:
        more, skipping = wire.lines(chunk, pending, skipping)
        found += more
        assert len(pending) <= wire.MAX_LINE_BYTES
    assert found == expected and not pending and not skipping
