"""A seeded generator of hostile host input and a runner that feeds it to every entry of a real cm.

Used by ``tests/test_fuzz_entries.py`` (a few thousand cases within the suite's budget) and by
``bench/fuzz.py`` (a larger run, also against another installed cm for before/after figures).

Entries: ``cm hook codex`` and ``cm hook work`` (one event per process, sessions started with a
valid SessionStart, transcripts that grow hostile lines too), ``cm capture`` (Pi bridge events),
``cm mcp`` (thousands of ``tools/call`` requests and raw lines over ONE stdio session) and
``cm import`` (hostile files and paths). Values: wrong types, non-standard numbers (``NaN``,
``Infinity``, ``1e400``), lone surrogates, NUL, duplicate keys, deep nesting, huge strings, odd
paths (``/proc/self/mem``, a FIFO, a directory).

Oracles, per case: no traceback, exit 0 or 1 only, no ``INTERNAL_ERROR`` (for MCP: no
"failed unexpectedly" line, and every line answered once: by its id, or with id null when its
id cannot be read); a case marked ``reject`` (its input is
not strict JSON, or is refused by design) must exit 1 and admit nothing: the count of
``admitted_events`` does not move, and its marker (``fz-reject-…``) never reaches the store's
files. ``Tally`` counts all of it, the refusals by code, and ``UNEXPECTED_FAILURE`` isolations
(a cm bug a drain met and set aside).
"""

from __future__ import annotations

import json
import os
import queue
import random
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable

STAMP = "2026-11-30T00:00:00.000Z"
VALID_SHARE = 0.2  # events left intact, so sessions go on and the drain's consumers meet the rest


class Raw(str):
    """A JSON token written verbatim (``NaN``, ``1e400``, a 300-digit integer, a truncated document)."""


class Pairs(list):
    """An object as a list of pairs, so a key can repeat."""


def encode(value: object) -> str:
    """JSON text for ``value``; ``Raw`` tokens verbatim, ``Pairs`` with their repeats, strings
    ASCII-escaped so a lone surrogate travels as ``\\udXXX``."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{encode(k)}:{encode(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode(k)}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


def nested(depth: int, leaf: object = 1, as_object: bool = False) -> Raw:
    if as_object:
        return Raw('{"a":' * depth + encode(leaf) + "}" * depth)
    return Raw("[" * depth + encode(leaf) + "]" * depth)


class Paths:
    """Odd filesystem objects a hostile event may name."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.fifo = os.path.join(root, "a-fifo.jsonl")
        if not os.path.exists(self.fifo):
            os.mkfifo(self.fifo)
        self.directory = os.path.join(root, "a-dir.md")
        os.makedirs(self.directory, exist_ok=True)
        self.fifo_md = os.path.join(root, "a-fifo.md")
        if not os.path.exists(self.fifo_md):
            os.mkfifo(self.fifo_md)
        self.link = os.path.join(root, "a-link.md")
        if not os.path.lexists(self.link):
            os.symlink("/proc/self/mem", self.link)

    def odd(self) -> list[str]:
        return ["/proc/self/mem", "/dev/zero", "/dev/null", self.fifo, self.directory, self.link, "/nonexistent/x",
                "/", "relative/path", "", "/" + "a" * 5000, "/tmp/../../etc/passwd"]


def bad_values(rng: random.Random) -> list[object]:
    """Values that are not strict JSON or not text: any event holding one must be refused."""
    return [Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), Raw("-1e999"), "\udbff", "a\ud800b",
            "x\x00y", nested(rng.choice([101, 150, 400, 990, 1200])), nested(rng.choice([120, 995]), as_object=True),
            Pairs([("k", 1), ("k", 2)])]


def odd_values(rng: random.Random, paths: Paths) -> list[object]:
    """Strict JSON of the wrong type, size or meaning: refused or accepted, never a crash."""
    return [0, -1, 2 ** 63, 2 ** 64, Raw("9" * 300), Raw("9" * 5000), 1e300, 1.5, -0.0, True, False, None, [], {},
            "", " ", "\u202e\u200b", "\x1b[31mred", "😀" * 50, "x" * rng.choice([600, 5000]),
            nested(rng.choice([5, 40, 99])), {"nested": {"x": [1, 2, {"y": None}]}}, "\ud83d\ude00",
            *paths.odd()]


class Case:
    __slots__ = ("entry", "payload", "reject", "marker", "what")

    def __init__(self, entry: str, payload: bytes, reject: bool, marker: str | None, what: str) -> None:
        self.entry, self.payload, self.reject, self.marker, self.what = entry, payload, reject, marker, what


class Tally:
    """What a run found."""

    def __init__(self) -> None:
        self.cases = Counter()          # per entry
        self.exits = Counter()          # (entry, exit code)
        self.codes = Counter()          # refusal codes
        self.tracebacks: list[str] = []
        self.internal: list[str] = []
        self.admitted_bad: list[str] = []  # a reject case that exited 0 or moved admitted_events
        self.bad_exit: list[str] = []
        self.unanswered: list[str] = []  # MCP lines that got no answer at all
        self.seconds = 0.0

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    def problems(self) -> list[str]:
        return self.tracebacks + self.internal + self.admitted_bad + self.bad_exit + self.unanswered

    def as_dict(self) -> dict:
        return {"cases": dict(self.cases), "total": self.total, "tracebacks": len(self.tracebacks),
                "internal": len(self.internal), "admittedBad": len(self.admitted_bad), "badExit": len(self.bad_exit),
                "mcpUnanswered": len(self.unanswered),
                "codes": dict(self.codes.most_common()), "seconds": round(self.seconds, 1)}


def _admitted(home: str) -> int:
    path = os.path.join(home, "data", "runtime.sqlite")
    if not os.path.exists(path):
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT COUNT(*) FROM admitted_events").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def _judge(tally: Tally, case: Case, code: int, err: str, moved: bool) -> None:
    tally.cases[case.entry] += 1
    tally.exits[(case.entry, code)] += 1
    if "Traceback" in err:
        tally.tracebacks.append(f"{case.entry} {case.what}: traceback")
    if "INTERNAL_ERROR" in err:
        tally.internal.append(f"{case.entry} {case.what}: {err.strip()[:160]}")
    if code not in (0, 1):
        tally.bad_exit.append(f"{case.entry} {case.what}: exit {code}")
    if code == 1 and err.startswith("cm: "):
        tally.codes[err.split(":")[1].strip()] += 1
    if case.reject and (code == 0 or moved):
        tally.admitted_bad.append(f"{case.entry} {case.what}: exit {code}, admitted {moved}")


# -- hook codex / hook work ---------------------------------------------------------------------

class _Transcript:
    def __init__(self, path: str, session: str) -> None:
        self.path = path
        self.lines = 0
        self.append({"type": "session_meta", "payload": {"id": session, "cli_version": "0.169.0"}})

    def append(self, record: dict) -> None:
        self.raw((json.dumps({"timestamp": STAMP, **record}) + "\n").encode())

    def raw(self, data: bytes) -> None:
        with open(self.path, "ab") as handle:
            handle.write(data)

    def user_turn(self, turn: str, text: str) -> None:
        self.append({"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}})
        self.append({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
            "type": "UserMessage", "id": f"u-{turn}", "content": [{"type": "text", "text": text}]}}})


def hook_cases(rng: random.Random, root: str, paths: Paths, sessions: int, per_session: int,
               client: str) -> list[tuple[Callable[[], None] | None, Case]]:
    """``(prepare, case)`` pairs: a valid SessionStart per session, then hostile events for it
    (``prepare`` grows the transcript first, sometimes with a hostile line)."""
    out: list[tuple[Callable[[], None] | None, Case]] = []
    for s in range(sessions):
        session = f"fz-{client}-{s}-{rng.randrange(1 << 30)}"
        transcript = _Transcript(os.path.join(root, f"{session}.jsonl"), session)
        cwd = os.path.join(root, "work")
        os.makedirs(cwd, exist_ok=True)
        base = {"session_id": session, "transcript_path": transcript.path, "cwd": cwd}
        start = dict(base, hook_event_name="SessionStart", source="startup", model="m")
        out.append((None, Case(client, json.dumps(start).encode(), False, None, "valid SessionStart")))
        for n in range(per_session):
            turn = f"t{n}"
            name = rng.choice(["UserPromptSubmit", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd",
                               "PreToolUse", "Teleport"])
            event: dict = dict(base, hook_event_name=name, turn_id=turn)
            if name == "UserPromptSubmit":
                event["prompt"] = f"prompt {n}"
            if name == "PostToolUse":
                event.update(tool_name="shell", tool_input={"cmd": "ls"}, tool_response={"out": "x"})
            reject, marker, what = _mutate(rng, event, paths, ["session_id", "transcript_path", "cwd", "turn_id",
                                                              "prompt", "source", "tool_input", "tool_response",
                                                              "hook_event_name", "model"],
                                           "prompt" if name == "UserPromptSubmit" else None)
            if name == "Teleport" and event.get("hook_event_name") == "Teleport":
                reject, what = True, what + " (unknown event)"
            prepare = _transcript_step(rng, transcript, turn, n)
            doc, broken = _document(rng, event)
            out.append((prepare, Case(client, doc, reject or broken, marker, f"{name} {what}")))
    return out


def _transcript_step(rng: random.Random, transcript: _Transcript, turn: str, n: int) -> Callable[[], None]:
    def step() -> None:
        roll = rng.random()
        if roll < 0.5:
            transcript.user_turn(turn, f"prompt {n}")
        elif roll < 0.7:  # a hostile transcript line: admitted as bytes, met by the drain's consumer
            transcript.raw(rng.choice([
                b'{"timestamp":NaN,"type":"event_msg","payload":{"type":"task_started","turn_id":"' + turn.encode() + b'"}}\n',
                b'{"timestamp":"' + STAMP.encode() + b'","type":"event_msg","payload":{"type":"item_completed",'
                b'"turn_id":"' + turn.encode() + b'","item":{"type":"UserMessage","id":"u","content":[{"type":"text",'
                b'"text":"\\udbff"}]}}}\n',
                ('{"timestamp":"' + STAMP + '","type":"event_msg","payload":' + "[" * 990 + "]" * 990 + "}\n").encode(),
                b'{"timestamp":"99999-01-01T00:00:00Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"'
                + turn.encode() + b'"}}\n',
                b'\xff\xfe not json\n', b'{"timestamp":1e400,"type":"response_item","payload":{}}\n',
                b'{"type":"event_msg","payload":{"type":"task_started","turn_id":{"a":1}}}\n',
            ]))
    return step


def _mutate(rng: random.Random, event: dict, paths: Paths, fields: list[str],
            text_field: str | None) -> tuple[bool, str | None, str]:
    """Change one to three fields; returns (must be refused, marker, description). A refused
    event carries a marker in ``text_field`` (a field cm stores as given) unless that field was
    the one changed."""
    reject = False
    what = []
    if rng.random() < VALID_SHARE:
        return False, None, "valid"
    chosen = rng.sample(fields, rng.randint(1, min(3, len(fields))))
    for field in chosen:
        roll = rng.random()
        if roll < 0.45:
            value = rng.choice(bad_values(rng))
            reject = True
            what.append(f"{field}=bad:{str(value)[:12]!r}")
        elif roll < 0.9:
            value = rng.choice(odd_values(rng, paths))
            what.append(f"{field}=odd:{str(value)[:12]!r}")
        else:
            event.pop(field, None)
            what.append(f"-{field}")
            continue
        _set(event, field, value)
    marker = None
    if reject and text_field is not None and not any(f == text_field or text_field.startswith(f + ".")
                                                     for f in chosen):
        head = text_field.partition(".")[0]
        if "." not in text_field or isinstance(event.get(head), dict):
            marker = f"fz-reject-{rng.randrange(1 << 40):x}"
            _set(event, text_field, f"{marker} said this")
    return reject, marker, " ".join(what)


def _set(event: dict, path: str, value: object) -> None:
    head, _, rest = path.partition(".")
    if rest and isinstance(event.get(head), dict):
        event[head] = dict(event[head])
        event[head][rest] = value
    else:
        event[head] = value


def _document(rng: random.Random, event: dict) -> tuple[bytes, bool]:
    """The event's bytes, and whether the whole document was broken instead (then it must be refused)."""
    text = encode(event)
    roll = rng.random()
    if roll < 0.04:
        return text[: rng.randrange(1, max(2, len(text)))].encode(), True  # truncated: never a whole object
    if roll < 0.06:
        return b"\xef\xbb\xbf" + text.encode(), True
    if roll < 0.08:
        return (text + " {}").encode(), True
    if roll < 0.09:
        return rng.randbytes(rng.randrange(1, 200)), True
    return text.encode(), False


# -- cm capture (Pi) ----------------------------------------------------------------------------

def capture_cases(rng: random.Random, paths: Paths, count: int) -> list[tuple[None, Case]]:
    out: list[tuple[None, Case]] = []
    for n in range(count):
        name = rng.choice(["input", "message_end", "message_end", "agent_end", "session_shutdown", "session_start",
                           "memory_flush", "memory_read"])
        payload: dict = {"input": {"text": f"typed {n}", "source": "interactive", "hasImages": False},
                         "message_end": {"role": rng.choice(["user", "assistant", "toolResult"]), "text": f"said {n}",
                                         "hasImages": False, "timestamp": 1795995559356 + n},
                         "agent_end": {"aborted": False}, "session_shutdown": {"reason": "quit"},
                         "session_start": {"reason": "startup"}}.get(name, {})
        event: dict = {"version": 1, "sessionId": f"fz-pi-{n % 40}", "eventId": f"ev-{n}-{rng.randrange(1 << 30)}",
                       "event": name, "cwd": paths.root, "hostInstance": "pi:fuzz:1", "payload": payload}
        reject, marker, what = _mutate(rng, event, paths, ["version", "sessionId", "eventId", "event", "cwd",
                                                           "hostInstance", "payload", "payload.text",
                                                           "payload.timestamp", "payload.role", "payload.source",
                                                           "payload.hasImages", "payload.aborted", "payload.reason"],
                                       "payload.note")
        doc, broken = _document(rng, event)
        out.append((None, Case("capture", doc, reject or broken, marker, f"{name} {what}")))
    return out


# -- running hooks and captures -----------------------------------------------------------------

def run_process_cases(cm: str, home: str, env: dict[str, str], cases: list[tuple[Callable[[], None] | None, Case]],
                      tally: Tally) -> None:
    for prepare, case in cases:
        if prepare is not None:
            prepare()
        argv = [cm, "capture", "--home", home] if case.entry == "capture" else [cm, "hook", case.entry, "--home", home]
        before = _admitted(home) if case.reject else 0
        proc = subprocess.run(argv, input=case.payload, capture_output=True, env=env, timeout=60)
        moved = case.reject and _admitted(home) != before
        _judge(tally, case, proc.returncode, proc.stderr.decode("utf-8", "replace"), moved)


# -- cm import ----------------------------------------------------------------------------------

def import_cases(rng: random.Random, root: str, paths: Paths, count: int) -> list[tuple[str, Case]]:
    """``(path, case)``: files and paths no import may accept."""
    contents = [b"", b"   \n\t\n", b"\xef\xbb\xbf", b"# Title\n\x00 nul\n", b"# T\n\xff\xfe bad utf-8\n",
                b"# T\n\xed\xa0\x80 a CESU surrogate\n", b"\xef\xbb\xbf\xef\xbb\xbf# double BOM \xc3\n",
                b"---\ntitle: \xf0\x28\x8c\x28\n---\n"]
    out = []
    for n in range(count):
        roll = rng.random()
        if roll < 0.7:
            path = os.path.join(root, f"imp-{n}.md")
            with open(path, "wb") as handle:
                handle.write(rng.choice(contents))
            what = "content"
        else:
            path = rng.choice(paths.odd() + [os.path.join(root, f"imp-{n}.txt"), paths.directory, paths.link,
                                             paths.fifo_md, os.path.join(root, "missing.md")])
            what = "path"
        out.append((path, Case("import", b"", True, None, f"{what} {path[-40:]!r}")))
    return out


def run_import_cases(cm: str, env: dict[str, str], cases: list[tuple[str, Case]], tally: Tally, home: str) -> None:
    for path, case in cases:
        before = _admitted(home)
        try:
            proc = subprocess.run([cm, "import", path, "--no-wait"], capture_output=True, env=env, timeout=60)
            code, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            code, err = -1, "timed out"
        _judge(tally, case, code, err, _admitted(home) != before)


# -- cm mcp over one stdio session --------------------------------------------------------------

TOOLS = {"memory_submit_user_turn": ("submissionId", "conversationId", "contextId", "text"),
         "memory_init": ("importId", "contextId", "sourceLabel", "basis", "understanding", "gaps"),
         "memory_read": ("contextId", "provenance"), "memory_status": ("submissionId", "conversationId", "importId")}


def mcp_cases(rng: random.Random, paths: Paths, count: int) -> list[Case]:
    out = []
    for n in range(count):
        tool = rng.choice(list(TOOLS))
        args: dict = {"memory_submit_user_turn": {"submissionId": f"s{n}", "contextId": "global", "text": f"said {n}"},
                      "memory_init": {"importId": f"i{n}", "contextId": "global", "sourceLabel": "fuzz",
                                      "basis": "visible_memory", "understanding": f"understood {n}"},
                      "memory_read": {}, "memory_status": {}}[tool]
        reject, marker, what = _mutate(rng, args, paths, list(TOOLS[tool]),
                                       {"memory_submit_user_turn": "text", "memory_init": "understanding"}.get(tool))
        call = {"jsonrpc": "2.0", "id": n + 10, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        doc = encode(call).encode()
        roll = rng.random()
        if roll < 0.05:  # a broken line
            doc = doc[: rng.randrange(1, len(doc))]
            reject, what = True, what + " (truncated)"
        elif roll < 0.12:  # a broken envelope
            name, doc = rng.choice(_envelopes(n + 10, tool, encode(args)))
            reject, what = True, what + f" ({name})"
        out.append(Case("mcp", doc, reject, marker, f"{tool} {what}"))
    return out


def _envelopes(request_id: int, tool: str, args: str) -> list[tuple[str, bytes]]:
    """A ``tools/call`` line whose JSON-RPC envelope is wrong: each must still get an answer."""
    params = f'{{"name":"{tool}","arguments":{args}}}'
    head = f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call"'
    return [
        ("jsonrpc 1.0", f'{{"jsonrpc":"1.0","id":{request_id},"method":"tools/call","params":{params}}}'.encode()),
        ("id true", f'{{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{params}}}'.encode()),
        ("id null", f'{{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{params}}}'.encode()),
        ("id 1.5", f'{{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{params}}}'.encode()),
        ("id repeated", f'{{"jsonrpc":"2.0","id":{request_id},"id":1,"method":"tools/call","params":{params}}}'.encode()),
        ("method 5", f'{{"jsonrpc":"2.0","id":{request_id},"method":5,"params":{params}}}'.encode()),
        ("params a list", (head + f',"params":[{params}]}}').encode()),
        ("a batch", f"[{head},\"params\":{params}}}]".encode()),
        ("NaN in params", (head + f',"params":{{"name":"{tool}","arguments":{args},"_meta":NaN}}}}').encode()),
        ("not UTF-8", (head + f',"params":{params}}}').encode().replace(b'"tools/call"', b'"tools/\xffcall"')),
        ("a notification with Infinity", f'{{"jsonrpc":"2.0","method":"notifications/progress","params":'
                                         f'{{"progressToken":{request_id},"progress":Infinity}}}}'.encode()),
        ("JSON, not an object", b"[]"),
        ("over 1 MiB", (head + ',"params":{"name":"' + tool + '","arguments":{"text":"' + "x" * (1 << 20)
                        + '"}}}').encode()) if request_id % 5 == 0 else ("empty object", b"{}"),
    ]


def _rpc_code(answer: dict) -> str:
    error = answer["error"] if isinstance(answer.get("error"), dict) else {}
    data = error.get("data")
    return f"jsonrpc {error.get('code')} {data.get('code') if isinstance(data, dict) else '-'}"


def run_mcp_cases(cm: str, env: dict[str, str], cases: list[Case], tally: Tally) -> None:
    """Every case over one ``cm mcp`` stdio session. Each line must get exactly one answer: by its
    id, or with id null when the id cannot be read (a broken line); a line without one is counted
    in ``tally.unanswered``."""
    argv = [cm, "mcp", "--client-id", "fuzz", "--capability", "relay", "--capability", "init", "--capability", "read",
            "--global", "--accept-client-reported-user-turns"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}
    lines = [json.dumps(init).encode(), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()]
    lines += [case.payload for case in cases]
    data = b"\n".join(lines) + b"\n"
    answers: dict[int, dict] = {}
    unmatched: list[dict] = []  # answers with id null
    # Answers under a number id with a fraction (1.0, 2.5): the case's own id, echoed as sent (issue 32).
    numbered: list[dict] = []
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    writer = threading.Thread(target=proc.stdin.write, args=(data,), daemon=True)
    writer.start()
    # Answers come concurrently and stdin's end would stop the server: wait for an answer to every
    # line (or for the server to fall silent), then close stdin.
    stdout_lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [stdout_lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    while len(answers) + len(unmatched) + len(numbered) < len(cases) + 1:
        try:
            line = stdout_lines.get(timeout=15)
        except queue.Empty:
            break
        try:
            message = json.loads(line)
        except ValueError:
            tally.bad_exit.append("mcp: a non-JSON line on stdout")
            continue
        if not isinstance(message, dict):
            tally.bad_exit.append("mcp: a line on stdout that is no JSON-RPC message")
        elif message.get("id") is None and "error" in message:
            unmatched.append(message)
        elif isinstance(message.get("id"), float):
            numbered.append(message)
        elif isinstance(message.get("id"), int):
            if message["id"] in answers:
                tally.bad_exit.append(f"mcp: two answers for id {message['id']}")
            answers[message["id"]] = message
    writer.join(timeout=60)
    proc.stdin.close()
    proc.wait(timeout=60)
    reader.join(timeout=10)
    err = b"".join(errors).decode("utf-8", "replace")
    tally.internal += [f"mcp: {line[:160]}" for line in err.splitlines() if "failed unexpectedly" in line]
    if "Traceback" in err:
        tally.tracebacks.append("mcp: traceback on stderr")
    if proc.returncode != 0:
        tally.bad_exit.append(f"mcp: exit {proc.returncode}")
    for answer in unmatched + numbered:
        tally.codes[_rpc_code(answer)] += 1
    missing = [case for n, case in enumerate(cases) if n + 10 not in answers]
    # An answer with id null, or under a fractional id, is one line's (which is not tracked by
    # number); the rest had none.
    tally.unanswered += [f"mcp {case.what}: no answer" for case in missing[len(unmatched) + len(numbered):]]
    for n, case in enumerate(cases):
        tally.cases["mcp"] += 1
        answer = answers.get(n + 10)
        if answer is None:
            continue
        result = answer.get("result") or {}
        if "error" in answer:
            tally.codes[_rpc_code(answer)] += 1
        elif result.get("isError"):
            code = (result.get("structuredContent") or {}).get("code", "?")
            tally.codes[code] += 1
            if code == "MEMORY_UNAVAILABLE":
                tally.internal.append(f"mcp {case.what}: MEMORY_UNAVAILABLE")
        elif case.reject:
            tally.admitted_bad.append(f"mcp {case.what}: accepted")


# -- after a run --------------------------------------------------------------------------------

def markers_in_store(home: str, markers: list[str]) -> list[str]:
    """The reject markers found in the store's files (database, WAL): must be none."""
    blob = b""
    data = os.path.join(home, "data")
    for name in ("runtime.sqlite", "runtime.sqlite-wal"):
        path = os.path.join(data, name)
        if os.path.exists(path):
            with open(path, "rb") as handle:
                blob += handle.read()
    return [m for m in markers if m.encode() in blob]


def isolated_unexpected(home: str) -> list[str]:
    """Details of sessions the drain set aside as UNEXPECTED_FAILURE (each a cm bug met)."""
    path = os.path.join(home, "data", "runtime.sqlite")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(codex_failures)")]
        if "detail" not in columns:
            return []
        return [row[0] or "?" for row in conn.execute(
            "SELECT detail FROM codex_failures WHERE issue = 'UNEXPECTED_FAILURE'")]
    finally:
        conn.close()


def run_all(cm: str, home: str, root: str, env: dict[str, str], seed: int, hooks: int, captures: int, mcp: int,
            imports: int, mcp_env: dict[str, str], per_session: int = 12) -> tuple[Tally, list[str]]:
    """One seeded run over every entry; returns the tally and every reject marker used. MCP runs
    with ``mcp_env`` (its own home: what it accepts are relayed turns and imports for the Writer,
    which the health check of the inboxes must not wait for)."""
    rng = random.Random(seed)
    paths = Paths(root)
    tally = Tally()
    started = time.monotonic()
    markers: list[str] = []
    sessions = max(1, hooks // (2 * (per_session + 1)))
    for client in ("codex", "work"):
        cases = hook_cases(rng, root, paths, sessions, per_session, client)
        markers += [c.marker for _, c in cases if c.marker]
        run_process_cases(cm, home, env, cases, tally)
    pi = capture_cases(rng, paths, captures)
    markers += [c.marker for _, c in pi if c.marker]
    run_process_cases(cm, home, env, pi, tally)
    calls = mcp_cases(rng, paths, mcp)
    markers += [c.marker for c in calls if c.marker]
    run_mcp_cases(cm, mcp_env, calls, tally)
    run_import_cases(cm, env, import_cases(rng, root, paths, imports), tally, home)
    tally.seconds = time.monotonic() - started
    return tally, markers
