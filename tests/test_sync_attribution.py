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


def test_with_three_machines_each_document_names_the_device_that_changed_it(tmp_path):
    """The remote's tip may be a third machine's merge: a document it only carried over is still
    attributed to the device whose commit changed it."""
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", A)
    with open(paths_a.document("preferences"), "w", encoding="utf-8") as f:
        f.write("# Preferences\n\n## Style\nTabs.\n")
    devices = {"a": "laptop", "b": "desktop", "c": "devbox"}
    homes = {"a": (home_a, paths_a)}
    for key in ("b", "c"):
        homes[key] = machine(tmp_path, key)
    for key, (home, _paths) in homes.items():
        ok(home, "config", "set", "deviceName", devices[key])
        ok(home, "sync", "init", remote)
    (home_b, paths_b), (home_c, paths_c) = homes["b"], homes["c"]
    before = {v["id"] for v in history(home_b)}
    edit(paths_a, "vim", "neovim")  # laptop changes the profile
    ok(home_a, "sync")
    with open(paths_c.document("preferences"), "a", encoding="utf-8") as f:  # devbox the preferences
        f.write("\n## Tests\nRun them first.\n")
    ok(home_c, "sync")  # its merge of laptop's commit is now the remote's tip
    ok(home_b, "sync")
    assert "neovim" in profile(paths_b) and "Run them first." in open(paths_b.document("preferences")).read()
    pulled = [v for v in history(home_b) if v["id"] not in before]
    by_target = {(v["target"], v["client"]) for v in pulled}
    assert by_target == {("profile", "sync from laptop"), ("preferences", "sync from devbox")}, pulled
