"""Process identity (boot id, pid, start ticks) and discovery of the Codex host process."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import CM, Transcript, db_rows, event, hook_env

from cmrunner.core import identity
from cmrunner.core.errors import CmError


def test_current_identity_matches_proc_and_is_alive():
    me = identity.current()
    assert me.pid == os.getpid()
    with open("/proc/sys/kernel/random/boot_id") as handle:
        assert me.boot_id == handle.read().strip()
    with open(f"/proc/{os.getpid()}/stat") as handle:
        assert me.starttime == int(handle.read().rsplit(")", 1)[1].split()[19])
    assert identity.is_alive(me)


def test_identity_is_dead_when_any_field_differs():
    me = identity.current()
    assert not identity.is_alive(identity.Identity("another-boot", me.pid, me.starttime))
    assert not identity.is_alive(identity.Identity(me.boot_id, me.pid, me.starttime + 1))
    finished = subprocess.Popen(["true"])
    finished.wait()
    assert not identity.is_alive(identity.Identity(me.boot_id, finished.pid, me.starttime))


def test_unreaped_child_is_not_alive():
    child = subprocess.Popen(["true"])
    recorded = identity.of(child.pid)
    assert recorded is not None
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, still a zombie
    try:
        assert not identity.is_alive(recorded)
    finally:
        child.wait()


def test_explicit_host_instance_is_validated():
    assert identity.host_instance({"COMMON_MEMORY_HOST_INSTANCE": "windows:42:1337"}) == "windows:42:1337"
    with pytest.raises(CmError) as caught:
        identity.host_instance({"COMMON_MEMORY_HOST_INSTANCE": "bad value!"})
    assert caught.value.code == "INVALID_HOST_INSTANCE"


def test_hook_finds_the_codex_ancestor(home, tmp_path, workdir):
    # A copy of bash named like Codex stands in for the host: the hook must walk up to it.
    fake_codex = str(tmp_path / "codex-host")
    shutil.copy("/bin/bash", fake_codex)
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    payload = str(tmp_path / "event.json")
    with open(payload, "w") as handle:
        json.dump(event("SessionStart", transcript, workdir, source="startup"), handle)
    env = hook_env()
    del env["COMMON_MEMORY_HOST_INSTANCE"]
    # "; true" keeps bash alive as the parent instead of exec-ing the hook in its place.
    host = subprocess.Popen([fake_codex, "-c", f"{CM} hook codex --home {home} < {payload}; true"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = host.communicate(timeout=30)
    assert host.returncode == 0 and err == b"", err
    (instance,) = db_rows(home, "SELECT host_instance FROM host_activations")[0]
    boot, pid, start = instance.split(":")
    assert int(pid) == host.pid and boot == identity.boot_id() and int(start) > 0


def test_parse_key_reads_back_a_process_identity_and_never_a_bridge_chosen_name():
    me = identity.current()
    assert identity.parse_key(me.key()) == me
    for explicit in ("test:host:1", "bench:1", "a:1:2", "pi:abc", "x-y:12:34"):
        assert identity.parse_key(explicit) is None


def _explicit_instance_accepted(value: str) -> bool:
    try:
        identity.host_instance({identity.HOST_INSTANCE_ENV: value})
    except CmError:
        return False
    return True


def test_an_explicit_host_instance_is_checked_as_a_whole_string():
    pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,199}")
    cases = ["pi:1", "codex.7_a-b", "a" * 200, "a" * 201, ":x", "-x", "é1", "x y", "", "x\n", "x٣", "X:9"]
    results = {case: _explicit_instance_accepted(case) for case in cases}
    assert any(results.values()) and not all(results.values())
    for case, accepted in results.items():
        assert accepted == (pattern.fullmatch(case) is not None), repr(case)


def test_a_recorded_key_needs_a_boot_id_of_the_kind_boot_id_returns():
    uuid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    assert identity.parse_key(f"{uuid}:12:34") == identity.Identity(uuid, 12, 34)
    assert identity.parse_key("boot-1700000000:12:34") is not None
    for bad in (uuid.upper(), uuid.replace("-", ""), uuid[:-1] + "g", uuid + "\n", "boot-", "boot-12a", "boot-٣",
                "0f1e2d3c-4b5a-6978-8796a-5b4c3d2e1f0"):
        assert identity.parse_key(f"{bad}:12:34") is None, repr(bad)
