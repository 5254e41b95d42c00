"""`cm history` attributes a change `cm sync` pulled to the device it came from (its configured
`deviceName`), never to this machine and never to another one."""

from __future__ import annotations

from sync_support import bare, edit, history, machine, ok, profile
from test_sync import A


def test_history_attributes_a_pulled_change_to_the_device_it_came_from(tmp_path):
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", A)
    ok(home_a, "config", "set", "deviceName", "laptop")
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "config", "set", "deviceName", "desktop")
    ok(home_b, "sync", "init", remote)
    edit(paths_a, "vim", "neovim")
    ok(home_a, "sync")
    ok(home_b, "sync")
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    ok(home_a, "sync")
    assert profile(paths_a) == profile(paths_b)
    on_b = [v for v in history(home_b) if v["kind"] == "sync"]
    on_a = [v for v in history(home_a) if v["kind"] == "sync"]
    assert {v["section"] for v in on_b} >= {"Work", "Editor"} and {v["section"] for v in on_a} == {"Shell"}
    assert {v["client"] for v in on_b} == {"sync from laptop"}, on_b
    assert {v["client"] for v in on_a} == {"sync from desktop"}, on_a
    assert any("+fish" in v["diff"] for v in on_a) and any("+neovim" in v["diff"] for v in on_b)
