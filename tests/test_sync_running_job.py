"""A sync that pulls a change while a real drain job holds its snapshot: the job's commit and the
pulled change are both kept. Two homes, a bare repository on disk, a real detached drain against
the loopback fake model, held mid-answer (``gate_file``) after the job read its documents.

What the product does (and this shows): a sync publishes only while it holds the drain lease, so
it waits for the running job instead of changing a file under it; the job's commit then passes its
complete-read CAS, and the sync merges by section again from the files as they are once it holds
the lease. The same section changed on both sides keeps the remote's text in place and this
machine's (the job's) in the trash as a sync conflict; history names the other device."""

from __future__ import annotations

import os
import subprocess
import time

from agent_support import configure_remote, policy
from conftest import CM, hook_env
from drain_support import start_drain
from sync_support import bare, history, machine, ok, trash
from writer_support import admit

from cmrunner.core import syncstate
from cmrunner.synthetic import fakemodel

PREFS = "# Preferences\n\n## Editor\nThe user uses vim.\n\n## Shell\nThe user uses zsh.\n"


def _prefs(paths) -> str:
    return open(paths.document("preferences"), encoding="utf-8").read()


def _rev(git_dir: str, ref: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "--verify", "--quiet", ref],
                          capture_output=True).stdout.decode().strip()


def _wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    ends = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < ends, what
        time.sleep(0.05)


def test_a_sync_during_a_running_job_keeps_the_jobs_commit_and_the_pulled_change(tmp_path):
    remote = bare(tmp_path)
    gate = str(tmp_path / "open-the-gate")
    script = policy("careful", inject={"submit_memory_decision": {"policy": True, "gate_file": gate}})
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "config", "set", "deviceName", "desk-b")
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        home_a = str(tmp_path / "a")
        paths_a, _cfg = configure_remote(home_a, fm.base_url)
        ok(home_a, "config", "set", "deviceName", "laptop-a")
        os.makedirs(paths_a.memory, mode=0o700, exist_ok=True)
        with open(paths_a.document("preferences"), "w", encoding="utf-8") as f:
            f.write(PREFS)
        ok(home_a, "sync", "init", remote)
        ok(home_b, "sync", "init", remote)
        # b changes the Editor section and pushes it.
        changed = _prefs(paths_b).replace("vim", "emacs")
        with open(paths_b.document("preferences"), "w", encoding="utf-8") as f:
            f.write(changed)
        ok(home_b, "sync")
        # a's job reads its documents, then waits for the model's answer.
        admit(paths_a, "Actually, I switched to helix as my editor.", "e1", batch="b1")
        drain = start_drain(home_a, hook_env(CM_TEST_DRAIN_LINGER_MS="0"))
        _wait_for(lambda: any(r.get("cue") == "submit_memory_decision" for r in fm.model_requests()),
                  "the job never reached its submission")
        assert "vim" in _prefs(paths_a)
        sync = subprocess.Popen([CM, "sync", "--home", home_a], env=hook_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        tip = _rev(remote, "main")
        git_a = syncstate.git_dir(paths_a)
        _wait_for(lambda: _rev(git_a, "refs/remotes/origin/main") == tip, "the sync never fetched b's change")
        time.sleep(1.5)  # past its read of the live files: it now waits for the drain lease
        assert sync.poll() is None, "the sync finished while a job was running"
        assert "vim" in _prefs(paths_a), "the sync changed a file under the running job"
        open(gate, "w").close()
        assert drain.wait(timeout=120) == 0, drain.stderr.read()
        out, err = sync.communicate(timeout=120)
    assert sync.returncode == 0, err.decode()
    assert "1 section(s) changed on both machines" in out.decode()
    text = _prefs(paths_a)
    assert "The user uses emacs." in text and "helix" not in text and "zsh" in text
    # The job committed (its CAS passed): its text is this machine's, in the trash, restorable.
    [conflict] = trash(home_a)
    assert conflict["section"] == "Editor" and conflict["reason"] == "sync conflict"
    editor = [v for v in history(home_a) if v["section"] == "Editor"]
    by_job = [v for v in editor if v["decision"] is not None and "helix" in v["diff"]]
    pulled = [v for v in editor if v["kind"] == "sync"]
    assert by_job and pulled and pulled[0]["client"] == "sync from desk-b", editor
    assert "+The user uses emacs." in pulled[0]["diff"]
    ok(home_b, "sync")
    assert "The user uses emacs." in _prefs(paths_b)
    assert "restored preferences / Editor" in ok(home_a, "restore", conflict["id"])
    assert "helix" in _prefs(paths_a)
