"""End to end with the real Pi coding agent (0.73.1) scripted the way users script it: ``pi -p`` and
``pi --mode json``, offline against the project's fake model, with cm's installed bridge (``-e``).

Pi runs these modes to completion and exits by itself; its agent-event handlers run in a queue it
does not wait for before ``session_shutdown``, which is exactly what these tests exercise. If node
or npm is missing they fail with what to install; they are never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env, run_cm, settle, wait_no_drain
from support import hosts

import cmrunner.bridge
from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)
BRIDGE = os.path.join(os.path.dirname(cmrunner.bridge.__file__), "pi-extension", "index.ts")
MODE_FLAGS = {"print": ["-p"], "json": ["--mode", "json"]}


@pytest.fixture(scope="module")
def pi() -> Path:
    return hosts.pi_binary()


def run_pi(pi: Path, home: str, root: Path, base_url: str, mode: str, prompts: list[str],
           before: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """One ``pi -p``/``--mode json`` process with one positional message per prompt, run to its own exit;
    ``before`` are extensions loaded ahead of the bridge."""
    agent_dir = hosts.write_pi_agent(root / "piagent", base_url)
    work = root / "work"
    work.mkdir(exist_ok=True)
    loads = [arg for path in (*before, BRIDGE) for arg in ("-e", path)]
    argv = [str(pi), *MODE_FLAGS[mode], "--no-extensions", *loads, "--provider", "fake", "--model", "fake-model",
            "--session-dir", str(root / "pisessions"), *prompts]
    process = subprocess.Popen(argv, cwd=work, env=hosts.pi_env(agent_dir, root / "scratchhome", CM, home),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(timeout=120)
    finally:
        hosts.stop(process)
    result = subprocess.CompletedProcess(argv, process.returncode, out.decode("utf-8", "replace"),
                                         err.decode("utf-8", "replace"))
    assert result.returncode == 0, result.stderr[-2000:]
    # A handler that touched an invalidated ctx is reported by Pi as an extension error.
    assert "Extension error" not in result.stderr, result.stderr[-2000:]
    return result



def system_text(request: dict) -> str:
    return json.dumps([m for m in request["body"]["messages"] if m["role"] == "system"])


@pytest.mark.parametrize("mode", ["print", "json"])
def test_what_a_scripted_pi_session_says_the_next_pi_p_session_carries(pi, home, tmp_path, mode):
    """pi (print or json) → bridge → cm capture → cm flush → Memory Agent → Markdown → next ``pi -p``."""
    from agent_support import configure_remote

    fact = f"Please remember that my preferred shell is fish-{mode}-5521"
    with fakemodel.running(str(tmp_path / "agent-model"), {"policy": "remember_user_turns"}) as agent_model, \
            fakemodel.running(str(tmp_path / "pi-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_remote(home, agent_model.base_url, api="chat_completions")
        first = run_pi(pi, home, tmp_path / "first", fake.base_url, mode, [fact])
        if mode == "json":  # the whole event stream: the bridge must not hold Pi's queue past shutdown
            events = [json.loads(line)["type"] for line in first.stdout.splitlines() if line.startswith("{")]
            assert events[0] == "session" and events[-3:] == ["message_end", "turn_end", "agent_end"], events
        flush = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home), timeout=120)
        assert flush.returncode == 0, flush.stderr
        assert db_rows(home, "SELECT state FROM session_turns") == [("settled",)]
        assert db_rows(home, "SELECT source, state, issue FROM observations") == [("interactive", "processed", None)]
        assert "fish-" + mode + "-5521" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        before = len(fake.model_requests())
        run_pi(pi, home, tmp_path / "second", fake.base_url, "print", ["Which shell do I prefer?"])
        requests = fake.model_requests()[before:]
        assert requests and all("fish-" + mode + "-5521" in system_text(r) for r in requests)
        wait_no_drain(home, timeout=60)  # the second session is work too; let it finish while the model is up


@pytest.mark.parametrize("mode", ["print", "json"])
def test_two_prompt_scripted_session_yields_two_settled_turns_sealed_at_quit(pi, home, tmp_path, mode):
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        run_pi(pi, home, tmp_path, fake.base_url, mode, ["I always use two-space indentation.",
                                                          "My main project is a Rust CLI."])
        assert len(fake.model_requests()) == 2
    settle(home)
    turns = db_rows(home, "SELECT session_id, state, batch_id IS NOT NULL FROM session_turns ORDER BY id")
    assert [t[1:] for t in turns] == [("settled", 1), ("settled", 1)]
    assert len({t[0] for t in turns}) == 1  # one Pi session
    rows = db_rows(home, "SELECT text, source, state FROM observations ORDER BY id")
    assert rows == [("I always use two-space indentation.", "interactive", "pending"),
                    ("My main project is a Rust CLI.", "interactive", "pending")]
    assert db_rows(home, "SELECT reason FROM session_batches") == [("session_end",)]


SLOW_EXTENSION = """
export default function slow(pi: any): void {
  pi.on("message_end", async (event: any) => {
    if (event?.message?.role === "assistant") await new Promise((resolve) => setTimeout(resolve, 1500));
  });
}
"""


def test_a_slow_extension_ahead_of_the_bridge_still_lets_the_print_turn_settle(pi, home, tmp_path):
    """Another extension holds Pi's event queue, so Pi emits session_shutdown before the bridge has
    seen the assistant's message_end or agent_end; the bridge captures the end after the run anyway."""
    slow = tmp_path / "slow.ts"
    slow.write_text(SLOW_EXTENSION)
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        run_pi(pi, home, tmp_path, fake.base_url, "print", ["My editor is helix-3307."], before=(str(slow),))
    settle(home)
    assert db_rows(home, "SELECT state, batch_id IS NOT NULL FROM session_turns") == [("settled", 1)]
    assert db_rows(home, "SELECT text, source, state FROM observations") == [("My editor is helix-3307.", "interactive",
                                                                               "pending")]
    roles = db_rows(home, "SELECT role FROM session_messages ORDER BY sequence")
    assert roles == [("user",), ("assistant",)]  # the context captured after shutdown began is kept too


def test_a_slash_word_and_a_bang_prompt_the_model_received_are_turns(pi, home, tmp_path):
    """Pi evidence is a user message whose text matches a staged input: a `/word` with no template or
    command of that name, and a `!…` under ``-p``, reach the model as text and are turns."""
    words = ["/home is full, clean it-4417", "!du -sh ~/cache-7781 says it is huge"]
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        run_pi(pi, home, tmp_path, fake.base_url, "print", words)
        requests = [json.dumps(r["body"]) for r in fake.model_requests()]
    assert all(any(json.dumps(text)[1:-1] in r for r in requests) for text in words)  # sent as text
    settle(home)
    assert db_rows(home, "SELECT text, state FROM observations ORDER BY id") == [(t, "pending") for t in words]
