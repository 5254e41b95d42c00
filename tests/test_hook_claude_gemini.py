"""`cm hook claude` and `cm hook gemini`: capture, injection, sealing and bad input (real subprocesses).

Both hosts share one admission (cmrunner.hooks.agenthook); each test runs for the host whose
event names it uses, and the parametrised ones run for both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import db_rows, hook_env, run_cm, settle

from cmrunner.hooks import claude, gemini
from cmrunner.reading import reader

HOSTS = {"claude": claude.SPEC, "gemini": gemini.SPEC}


class Session:
    """One host session driven through the real `cm hook <host>` entry."""

    def __init__(self, host: str, home: str, cwd: str, session: str = "sess-1", env: dict | None = None) -> None:
        self.host, self.spec, self.home, self.cwd, self.session = host, HOSTS[host], home, cwd, session
        self.env = env or hook_env()
        self.n = 0
        self.chat = os.path.join(os.path.dirname(cwd), f"chat-{session}.jsonl")  # Gemini's chat record
        self.last = ""

    def send(self, name: str, **fields: object) -> dict:
        payload = {"session_id": self.session, "transcript_path": self.chat, "cwd": self.cwd,
                   "hook_event_name": name, **fields}
        proc = run_cm(["hook", self.host, "--home", self.home], json.dumps(payload).encode(), self.env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def start(self, source: str = "startup") -> dict:
        return self.send(self.spec.start, source=source)

    def prompt(self, text: str, shown: str | None = None) -> dict:
        """A prompt as the host reports it; ``shown``: what the user typed when it is a command's expansion."""
        self.n += 1
        self.last = text
        out = self.send(self.spec.prompt, **{self.spec.prompt_field: text, "prompt_id": f"p{self.n}"})
        record: dict = {"id": f"u{self.n}", "type": "user", "content": [{"text": text}]}
        if shown is not None:
            record["displayContent"] = [{"text": shown}]
        with open(self.chat, "a") as handle:  # Gemini writes the user record after BeforeAgent
            handle.write(json.dumps(record) + "\n")
        return out

    def stop(self, reply: str = "Done.") -> dict:
        return self.send(self.spec.stop, **{self.spec.reply_field: reply, "prompt_id": f"p{self.n}",
                                            "prompt": self.last})

    def turn(self, text: str, shown: str | None = None) -> None:
        assert self.prompt(text, shown) == {}
        assert self.stop() == {}

    def end(self) -> dict:
        return self.send(self.spec.end, reason="other")


def batches(home: str) -> list[list[str]]:
    grouped: dict[str, list[str]] = {}
    for batch, text in db_rows(home, "SELECT batch_id, text FROM observations WHERE batch_id IS NOT NULL ORDER BY id"):
        grouped.setdefault(batch, []).append(text)
    return list(grouped.values())


def rejections(home: str) -> list[tuple]:
    return db_rows(home, "SELECT host, code, count FROM hook_rejections ORDER BY code")


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_twenty_one_turns_seal_ten_ten_and_the_tail_at_session_end(host, home, workdir):
    session = Session(host, home, workdir)
    session.start()
    prompts = [f"Remember fact {n} about my setup." for n in range(1, 22)]
    for text in prompts:
        session.turn(text)
    settle(home)
    assert batches(home) == [prompts[:10], prompts[10:20]]
    assert session.end() == {}
    settle(home)
    assert batches(home) == [prompts[:10], prompts[10:20], prompts[20:]]
    sources = {r[0] for r in db_rows(home, "SELECT source FROM observations")}
    assert sources == {"claude_user_prompt" if host == "claude" else "gemini_user_prompt"}


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_only_a_command_the_host_runs_is_kept_without_its_words(host, home, workdir, tmp_path):
    """Observed on Claude Code 2.1.328 and Gemini CLI 0.61: an unknown `/word` and a `!…` that reach
    the prompt hook were sent to the model as text; a known `/name` ran as a command."""
    user_home = tmp_path / "userhome"
    folder = ".claude/commands/deploy.md" if host == "claude" else ".gemini/commands/deploy.toml"
    (user_home / folder).parent.mkdir(parents=True)
    (user_home / folder).write_text("Deploy $ARGUMENTS\n")
    project = Path(workdir) / (".claude/commands/note.md" if host == "claude" else ".gemini/commands/note.toml")
    project.parent.mkdir(parents=True)
    project.write_text("Answer with one word: $ARGUMENTS\n")
    if host == "claude":  # a project skill is a command too
        (Path(workdir) / ".claude/skills/tidy").mkdir(parents=True)
        (Path(workdir) / ".claude/skills/tidy/SKILL.md").write_text("---\nname: tidy\n---\nTidy $ARGUMENTS\n")
    session = Session(host, home, workdir, env=hook_env(HOME=str(user_home)))
    session.start()
    session.turn("/model claude-secret-9913")  # a built-in
    if host == "claude":
        session.turn("/tidy skill-arg-8815")
    session.turn("/note project-command-arg-5512")  # the project's custom command
    session.turn("/deploy user-command-arg-6613")  # the user's custom command
    session.turn("/plugin:review plugin-arg-7714")  # a namespaced (plugin or folder) command
    words = ["/home is full, clean it-4417", "!cat ~/.ssh/config-7781 says what?",
             "/etc/hosts-4417 is where I keep my host aliases.", "/Deploy is tomorrow-3318", "/tidy-up the desk-2207",
             "/Model of my car is a Golf-5519"]
    for text in words:
        session.turn(text)
    session.end()
    settle(home)
    assert [r[0] for r in db_rows(home, "SELECT text FROM observations ORDER BY id")] == words
    queued = json.dumps(db_rows(home, "SELECT * FROM hook_inbox")) + json.dumps(db_rows(home, "SELECT * FROM observations"))
    for secret in ("claude-secret-9913", "project-command-arg-5512", "user-command-arg-6613", "plugin-arg-7714",
                   "skill-arg-8815"):
        assert secret not in queued


def test_two_identical_claude_prompts_without_prompt_id_stay_two_turns(home, workdir):
    """An older Claude Code sends no `prompt_id`: the two payloads are byte-identical; the transcript
    between them is not. A re-delivery of one event (same transcript) is still admitted once."""
    session = Session("claude", home, workdir)
    session.start()
    with open(session.chat, "w") as transcript:
        transcript.write("{}\n")

    def prompt_and_stop(reply_line: str) -> None:
        payload = {"prompt": "Yes, use the staging cluster-8812."}
        assert session.send("UserPromptSubmit", **payload) == {}
        assert session.send("UserPromptSubmit", **payload) == {}  # the same event delivered twice
        with open(session.chat, "a") as transcript:  # Claude Code writes the turn to its transcript
            transcript.write(json.dumps({"type": "user", "message": payload["prompt"]}) + "\n" + reply_line + "\n")
        assert session.send("Stop", last_assistant_message="Done.") == {}

    prompt_and_stop('{"type": "assistant", "n": 1}')
    prompt_and_stop('{"type": "assistant", "n": 2}')
    session.end()
    settle(home)
    rows = db_rows(home, "SELECT text, state FROM observations ORDER BY id")
    assert rows == [("Yes, use the staging cluster-8812.", "pending")] * 2
    assert db_rows(home, "SELECT state, COUNT(*) FROM session_turns GROUP BY state") == [("settled", 2)]


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_the_assistant_reply_is_context_only(host, home, workdir):
    session = Session(host, home, workdir)
    session.start()
    session.prompt("I deploy with nomad-5521.")
    session.stop("Noted: you deploy with nomad-5521 and also kubectl-8812.")
    session.end()
    settle(home)
    assert [r[0] for r in db_rows(home, "SELECT text FROM observations")] == ["I deploy with nomad-5521."]
    roles = db_rows(home, "SELECT role, text FROM session_messages ORDER BY sequence")
    assert roles == [("user", None), ("assistant", "Noted: you deploy with nomad-5521 and also kubectl-8812.")]


def test_a_turn_without_stop_is_interrupted_and_not_evidence(home, workdir):
    session = Session("claude", home, workdir)
    session.start()
    session.prompt("I like tea-1190.")  # the user pressed Esc: Claude Code sends no Stop
    session.turn("I like coffee-2280.")
    session.end()
    settle(home)
    rows = db_rows(home, "SELECT text, state, issue FROM observations ORDER BY id")
    assert rows[0] == ("I like tea-1190.", "quarantined", "INTERRUPTED_TURN")
    assert batches(home) == [["I like coffee-2280."]]


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_session_start_injects_memory_and_compaction_reattaches_the_frozen_block(host, home, workdir):
    memory = Path(home) / "data" / "memory"
    session = Session(host, home, workdir)
    session.start()  # creates the home
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Editor\nThe user edits with helix-6620.\n")
    fresh = Session(host, home, workdir, session="sess-2")
    out = fresh.start()
    context = out["hookSpecificOutput"]
    assert context["hookEventName"] == HOSTS[host].start and "helix-6620" in context["additionalContext"]
    # Neither host has the /memory-refresh command: its model must not be told to offer it.
    assert "/memory-refresh" not in context["additionalContext"]
    assert "the next session receives the current memory" in context["additionalContext"]
    (memory / "profile.md").write_text("# Profile\n\n## Editor\nThe user edits with vim-0001.\n")
    again = fresh.start("compact")  # the same session after compaction: the frozen block, not a new read
    assert again["hookSpecificOutput"]["additionalContext"] == context["additionalContext"]
    compact_event = HOSTS[host].compact
    assert fresh.send(compact_event, trigger="auto") == {}


def test_claude_injection_stays_under_the_cut_and_says_so_when_too_large(home, workdir):
    session = Session("claude", home, workdir)
    session.start()
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Notes\n" + "The user likes long notes. " * 600 + "\n")
    out = Session("claude", home, workdir, session="sess-big").start()
    assert len(out["hookSpecificOutput"]["additionalContext"]) < 10_000
    assert "unavailable" in out["hookSpecificOutput"]["additionalContext"]
    assert "injection limit" in out["systemMessage"]


def test_gemini_takes_the_readers_whole_block():
    # gemini.py holds the number itself so that per-turn events do not load the reader (issue 35)
    assert gemini.SPEC.context_limit == gemini.CONTEXT_LIMIT == reader.INJECTION_LIMIT


@pytest.mark.parametrize("host", ["claude", "gemini"])
def test_bad_input_exits_zero_stores_nothing_and_is_counted(host, home, workdir):
    session = Session(host, home, workdir)
    session.start()
    before = db_rows(home, "SELECT COUNT(*) FROM hook_inbox")
    bad = [
        {"hook_event_name": HOSTS[host].prompt, "session_id": "sess-1", "cwd": workdir},  # no prompt
        {"hook_event_name": HOSTS[host].prompt, "session_id": "sess-1", "cwd": "relative", "prompt": "x"},
    ]
    for payload in bad:
        proc = run_cm(["hook", host, "--home", home], json.dumps(payload).encode())
        assert proc.returncode == 0 and json.loads(proc.stdout) == {}
        assert b"INVALID_HOOK_INPUT" in proc.stderr
    big = json.dumps({"hook_event_name": HOSTS[host].prompt, "session_id": "sess-1", "cwd": workdir,
                      "prompt": "x" * (2 << 20)}).encode()
    proc = run_cm(["hook", host, "--home", home], big)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {} and b"INPUT_TOO_LARGE" in proc.stderr
    proc = run_cm(["hook", host, "--home", home], b"{not json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}
    assert db_rows(home, "SELECT COUNT(*) FROM hook_inbox") == before
    client = HOSTS[host].client
    assert rejections(home) == [(client, "INPUT_TOO_LARGE", 1), (client, "INVALID_HOOK_INPUT", 3)]


def test_an_unknown_event_is_ignored_quietly_with_a_record_and_a_known_unused_one_without(home, workdir):
    session = Session("claude", home, workdir)
    session.start()
    payload = {"hook_event_name": "SomethingNew", "session_id": "sess-1", "cwd": workdir}
    proc = run_cm(["hook", "claude", "--home", home], json.dumps(payload).encode())
    assert (proc.returncode, json.loads(proc.stdout), proc.stderr) == (0, {}, b"")
    assert session.send("PostToolUse", tool_name="Bash", tool_response="secret-tool-output-3391") == {}
    assert rejections(home) == [("claude-code", "UNKNOWN_HOOK_EVENT", 1)]
    assert "secret-tool-output-3391" not in json.dumps(db_rows(home, "SELECT * FROM hook_inbox"))
    status = run_cm(["status", "--json", "--home", home])
    report = json.loads(status.stdout)
    assert report["hookRejections"][0]["code"] == "UNKNOWN_HOOK_EVENT"


def test_a_prompt_without_session_start_is_refused_and_counted(home, workdir):
    session = Session("gemini", home, workdir)
    assert session.prompt("I use fish-3310.") == {}
    assert rejections(home) == [("gemini", "SESSION_START_REQUIRED", 1)]
    assert db_rows(home, "SELECT COUNT(*) FROM hook_inbox") == [(0,)]


def test_a_host_that_exits_without_session_end_has_its_tail_sealed_by_the_next_drain(home, workdir, tmp_path):
    """Gemini CLI does not wait for SessionEnd: the drain notices the host process is gone."""
    env = {k: v for k, v in hook_env().items() if k != "COMMON_MEMORY_HOST_INSTANCE"}
    script = tmp_path / "host.py"
    # A stand-in host process: it runs the hook commands through a shell, as Gemini CLI does, then exits.
    script.write_text(
        "import json, subprocess, sys\n"
        "cm, home, cwd = sys.argv[1:4]\n"
        "chat = cwd + '.chat.jsonl'\n"
        "def send(name, **f):\n"
        "    p = dict(session_id='g-1', cwd=cwd, transcript_path=chat, hook_event_name=name, **f)\n"
        "    r = subprocess.run(['/bin/sh', '-c', f'{cm} hook gemini --home {home}'], input=json.dumps(p).encode(),"
        " capture_output=True)\n"
        "    assert r.returncode == 0 and r.stderr == b'', r.stderr\n"
        "open(chat, 'w').write(json.dumps({'type': 'user', 'content': [{'text': 'My shell is elvish-4471.'}]}) + '\\n')\n"
        "send('SessionStart', source='startup')\n"
        "send('BeforeAgent', prompt='My shell is elvish-4471.')\n"
        "send('AfterAgent', prompt='My shell is elvish-4471.', prompt_response='ok')\n"
    )
    from conftest import CM

    subprocess.run([sys.executable, str(script), CM, home, workdir], env=env, check=True, timeout=60)
    settle(home)
    assert batches(home) == [["My shell is elvish-4471."]]
    instance = db_rows(home, "SELECT host_instance FROM sessions")[0][0]
    assert instance.split(":")[-2].isdigit()  # the stand-in host's identity, found up the process chain
    assert db_rows(home, "SELECT closing FROM sessions") == [(1,)]


def test_a_live_host_keeps_its_tail_open(home, workdir):
    """The same without exit: a host instance that is still running is not sealed early."""
    session = Session("gemini", home, workdir, env=hook_env(COMMON_MEMORY_HOST_INSTANCE=f"{_boot()}:{os.getpid()}:"
                                                             f"{_start(os.getpid())}"))
    session.start()
    session.turn("My shell is nushell-5510.")
    settle(home)
    assert batches(home) == []
    assert db_rows(home, "SELECT closing FROM sessions") == [(0,)]


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _start(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2:].split()[19])


def test_gemini_prompt_loses_the_hook_context_gemini_prepends_to_it(home, workdir):
    """gemini -p reports BeforeAgent's prompt with the SessionStart context in front (observed on 0.61.0)."""
    session = Session("gemini", home, workdir)
    session.start()
    block = "<hook_context>Common Memory: … &lt;&lt;&lt;common-memory-data x&gt;&gt;&gt; cat Miso-1 </hook_context>"
    session.turn(f"{block}\n\nI ride a bike called Rocinante-2231.")
    session.turn("<hook_context>an unclosed block that never ends, Miso-1")
    session.end()
    settle(home)
    assert db_rows(home, "SELECT text, state, issue FROM observations ORDER BY id") == [
        ("I ride a bike called Rocinante-2231.", "pending", None),
        ("<hook_context>an unclosed block that never ends, Miso-1", "quarantined", "UNCONFIRMED_PROMPT")]


def test_gemini_keeps_only_the_typed_words_when_several_hooks_add_context(home, workdir):
    """Each hook's block wrapped separately, a BeforeAgent hook's context as its own part of the chat
    record (observed on 0.61.0), and framing that is not Gemini's own: never evidence."""
    session = Session("gemini", home, workdir)
    session.start()
    two = ("<hook_context>Common Memory: &lt;common-memory-data&gt; cat Miso-1</hook_context>\n\n"
           "<hook_context>other-extension: deploy host build-7 (ctx-5531)</hook_context>\n\n")
    session.turn(two + "I ride a bike called Rocinante-2231.")
    typed = "My editor is helix-6612."
    session.n += 1
    session.last = two + typed
    session.send("BeforeAgent", prompt=session.last, prompt_id=f"p{session.n}")
    with open(session.chat, "a") as handle:
        handle.write(json.dumps({"type": "user", "content": [
            {"text": session.last}, {"text": "<hook_context>BeforeAgent: lint with ruff (ctx-7741)</hook_context>"}],
            "displayContent": [{"text": session.last}]}) + "\n")
    session.stop()
    foreign = "<hook_context>a <b>raw</b> tag ctx-8842</hook_context>\n\nMy shell is fish-2290."
    session.turn(foreign)
    session.end()
    settle(home)
    assert db_rows(home, "SELECT text, state, issue FROM observations ORDER BY id") == [
        ("I ride a bike called Rocinante-2231.", "pending", None),
        ("My editor is helix-6612.", "pending", None),
        (foreign, "quarantined", "UNCONFIRMED_PROMPT")]


def test_an_unconfirmed_gemini_prompt_is_kept_aside_without_cms_own_memory_block(home, workdir):
    """When the typed part cannot be told apart, what is kept (for `cm release`) never holds the memory
    cm injected, as Gemini quotes it (`<` and `>` escaped)."""
    Session("gemini", home, workdir, session="setup").start()  # creates the home
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Editor\nThe user edits with helix-6620.\n")
    session = Session("gemini", home, workdir)
    block = session.start()["hookSpecificOutput"]["additionalContext"]
    quoted = block.replace("<", "&lt;").replace(">", "&gt;")
    session.turn(f"<hook_context>{quoted}\n<b>not gemini's framing</b></hook_context>\n\nMy shell is fish-2290.")
    session.end()
    settle(home)
    rows = db_rows(home, "SELECT text, state, issue FROM observations")
    assert [r[1:] for r in rows] == [("quarantined", "UNCONFIRMED_PROMPT")]
    assert "fish-2290" in rows[0][0] and "helix-6620" not in rows[0][0]


def test_a_gemini_command_expansion_is_quarantined_and_an_unconfirmed_prompt_too(home, workdir):
    """gemini reports `/note x` to BeforeAgent as the command's expansion; only its chat record shows `/note x`."""
    session = Session("gemini", home, workdir)
    session.start()
    session.turn("Answer with one word. Topic: command-arg-7712", shown="/note command-arg-7712")
    session.turn("I keep my notes in org-mode-3321.")
    session.send("BeforeAgent", prompt="A prompt the chat record never shows-9901.")
    session.send("AfterAgent", prompt="A prompt the chat record never shows-9901.", prompt_response="ok")
    session.end()
    settle(home)
    rows = db_rows(home, "SELECT text, state, issue FROM observations ORDER BY id")
    assert rows == [("Answer with one word. Topic: command-arg-7712", "quarantined", "COMMAND_EXPANSION"),
                    ("I keep my notes in org-mode-3321.", "pending", None),
                    ("A prompt the chat record never shows-9901.", "quarantined", "UNCONFIRMED_PROMPT")]


@pytest.mark.usefixtures("quiet_drain")
def test_a_purge_clears_queued_prompt_text_and_keeps_the_turn(home, workdir):
    """What `cm purge` runs over the hook inbox (writer_proc/purge.py): queued words holding purged text go."""
    from cmrunner.capture import hook_inbox
    from cmrunner.core import config as config_mod, store
    from cmrunner.core.home import DataPaths

    session = Session("claude", home, workdir)
    session.start()
    session.prompt("My locker code is purge-me-4410.")
    session.prompt("I like green tea.")
    conn = store.open_store(DataPaths(config_mod.load(home).data_root))
    try:
        with store.immediate(conn):
            assert hook_inbox.clear_containing(conn, ["purge-me-4410"]) == 1
    finally:
        conn.close()
    bodies = [json.loads(r[0]) for r in db_rows(home, "SELECT body FROM hook_inbox ORDER BY id")]
    assert [b["text"] for b in bodies] == [None, "I like green tea."] and bodies[0]["purged"] is True
