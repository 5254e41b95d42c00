"""A job is read in at most two tool calls whatever the model's reading style: job-sized pages, and a
first read that returns everything the job holds when it fits (issue 35)."""

from __future__ import annotations

import json

import pytest
from agent_support import configure_remote
from conftest import db_rows, run_cm
from support.procs import wait_no_drain

from cmrunner.core import config as config_mod, sections
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc import contract, reads as reads_mod, tools
from cmrunner.writer_proc.reads import ReadPort, Source


def _port(texts: tuple[str, ...] = ("I use Nix flakes.", "Schön " * 40)) -> ReadPort:
    sources = [Source(n + 1, text, "global", "user_explicit", "codex_user_delivery", "2026-11-30T00:00:00.000Z")
               for n, text in enumerate(texts)]
    snapshot = {"profile": sections.parse("profile", b"# Profile\n\n## Walks\nlong walks\n"),
                "preferences": sections.parse("preferences", b"# Preferences\n\n## Tabs\nalways\n")}
    return ReadPort("job-1", sources, snapshot, frozenset({"global"}), lambda p, r: ("ok", {}), lambda: None)


FIRST_READS = [
    ("inspect_ingest", {"handle": "ingest_1", "offset": 0}),
    ("read_ingest", {"handle": "ingest_2", "block": "b1", "offset": 0}),
    ("read_ingest", {"handle": None, "block": None, "offset": None}),
    ("inspect_memory", {"handle": None, "target": None, "offset": 0}),
    ("inspect_memory", {"handle": None, "target": "preferences", "offset": 0}),
]


@pytest.mark.parametrize("name,args", FIRST_READS)
def test_the_first_read_of_any_tool_returns_every_source_and_document(name, args):
    reads = _port()
    if name == "inspect_memory":
        args = {**args, "handle": reads.snapshot_handle}
    box = tools.Toolbox(reads, contract.decision_json_schema(False))
    result = box.call(name, json.dumps(args)).result
    assert result["complete"] is True
    sources = result.get("sources") or result["blocks"]
    assert {b["handle"]: b["text"] for b in sources} == {h: s.text for h, s in reads.sources.items()}
    memory = result.get("memory") or result["documents"]
    assert {d["target"]: d["text"].encode() for d in memory} == {t: d.data for t, d in reads.snapshot.items()}
    assert all(d["next"] is None and d["sections"] for d in memory)
    assert reads.ingest_fully_read and reads.fully_read_targets == {"profile", "preferences"}
    for later_name, later_args in FIRST_READS:
        if later_name == "inspect_memory":
            later_args = {**later_args, "handle": reads.snapshot_handle}
        again = box.call(later_name, json.dumps(later_args)).result
        assert again == tools.ALREADY_RETURNED, "the text is served once per attempt, not again"


def test_a_job_larger_than_one_page_is_paged_as_before(monkeypatch):
    monkeypatch.setattr(reads_mod, "BULK_PAGE", 200)
    reads = _port()
    first = reads.inspect_ingest("ingest_2")
    assert "complete" not in first and not reads.ingest_fully_read
    page = reads.read_ingest("ingest_2", "b1", 0)
    assert page["next"] is not None and len(page["text"].encode()) <= 200, "pages are BULK_PAGE long"
    assert reads.read_ingest("ingest_2", "b1", page["next"])["next"] is None
    assert not reads.ingest_fully_read, "ingest_1 was never read"


def test_a_rejected_first_call_does_not_spend_the_first_read():
    reads = _port()
    box = tools.Toolbox(reads, contract.decision_json_schema(False))
    assert box.call("read_ingest", json.dumps({"handle": "ingest_9", "block": "b1", "offset": 0})).rejected
    assert box.call("read_ingest", json.dumps({"handle": "ingest_1", "block": "b1", "offset": 0})).result["complete"]


def _markdown(size: int) -> str:
    paragraph = "We review each change before merging and keep the build green on every branch. " * 6
    parts, n = ["# Handbook\n\n"], 0
    while sum(len(p) for p in parts) < size:
        parts.append(f"## Chapter {n}\n\n{paragraph}\n\n" if n % 5 == 0 else paragraph + "\n\n")
        n += 1
    return "".join(parts)


@pytest.mark.parametrize("reading", ["bulk", "blocks"])
def test_an_import_costs_two_requests_per_part_whatever_the_reading_style(home, tmp_path, reading):
    path = tmp_path / "handbook.md"
    path.write_text(_markdown(300_000), encoding="utf-8")
    size = path.stat().st_size
    with fakemodel.running(str(tmp_path / "fm"), {"policy": "ignore", "reading": reading}) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        data = config_mod.load(home).data
        data["disclosure"]["allowedProvenance"] = ["user_explicit", "document_import"]
        data["spend"] = {"requestsPerHour": None, "tokensPerDay": None, "tokensPerMonth": None}
        config_mod.save(home, data)
        proc = run_cm(["--home", home, "import", str(path), "--no-wait", "--yes"], timeout=300)
        assert proc.returncode == 0, proc.stderr
        parts = int(proc.stdout.decode().split("plan: ", 1)[1].split(" part", 1)[0])
        wait_no_drain(home, timeout=600)
        log = fm.model_requests()
    jobs = db_rows(home, "SELECT COUNT(*) FROM jobs WHERE state = 'done'")[0][0]
    assert parts > 3 and jobs >= parts - 1, "a part per job (a short last part may join the one before)"
    first = "read_ingest" if reading == "bulk" else "inspect_ingest"
    # each job: the task, answered by one read that returned the part and the documents; then the decision
    assert [r["cue"] for r in log] == [first, "submit_memory_decision"] * jobs
    assert sum(r["bytes"] for r in log) <= 2 * size, (sum(r["bytes"] for r in log), size)
