"""The Memory Agent's tools over a real ReadPort: sanitised rejections, notes, submissions, aborts."""

from __future__ import annotations

import json

import pytest

from cmrunner.core import sections
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import contract, reads as reads_mod, tools
from cmrunner.writer_proc.reads import ReadPort, Source

SECRET_LOOKING = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"


def _box(accept=None, lease_ok=True):
    source = Source(7, "I like long walks. " * 10, "global", "user_explicit", "codex_user_delivery",
                    "2026-11-30T00:00:00.000Z")
    snapshot = {"profile": sections.parse("profile", b"# Profile\n\n## Walks\nlong\n")}

    def check_lease() -> None:
        if not lease_ok:
            raise CmError("STALE_LEASE", "lost")

    reads = ReadPort("job-1", [source], snapshot, frozenset({"profile"}),
                     accept or (lambda payload, reads: ("ok", {})), check_lease)
    return tools.Toolbox(reads, contract.decision_json_schema(False)), reads


def test_definitions_are_strict_and_named_exactly():
    defs = tools.definitions(contract.decision_json_schema(False))
    assert [d["name"] for d in defs] == list(tools.TOOL_NAMES)
    for d in defs[:5]:
        params = d["parameters"]
        assert params["additionalProperties"] is False and params["required"] == list(params["properties"])


@pytest.mark.parametrize(("name", "raw", "code", "errors"), [
    ("read_ingest", "{", "TOOL_ARGUMENTS_INVALID", [{"path": "$", "rule": "json"}]),
    ("read_ingest", "[1]", "TOOL_ARGUMENTS_INVALID", [{"path": "$", "rule": "type"}]),
    ("inspect_ingest", json.dumps({"offset": 0}), "TOOL_ARGUMENTS_INVALID", [{"path": "$.handle", "rule": "required"}]),
    ("read_ingest", json.dumps({"handle": "ingest_7"}), "INVALID_BLOCK_REFERENCE", None),
    ("read_ingest", json.dumps({"handle": None, "block": "b1", "offset": 0}), "INVALID_BLOCK_REFERENCE", None),
    ("read_ingest", json.dumps({"handle": None, "block": None, "offset": 5}), "NONCONTIGUOUS_READ", None),
    ("read_ingest", json.dumps({"handle": "ingest_7", "block": "b1", "offset": -1}), "TOOL_ARGUMENTS_INVALID",
     [{"path": "$.offset", "rule": "type"}]),
    ("inspect_ingest", json.dumps({"handle": "ingest_7", SECRET_LOOKING: 1}), "TOOL_ARGUMENTS_INVALID",
     [{"path": "$", "rule": "additionalProperties"}]),
    ("inspect_ingest", json.dumps({"handle": SECRET_LOOKING}), "INVALID_INGEST_HANDLE", None),
    ("read_ingest", json.dumps({"handle": "ingest_7", "block": "b1", "offset": 64}), "NONCONTIGUOUS_READ", None),
    ("record_working_notes", json.dumps({"notes": f"api_key = {SECRET_LOOKING}"}), "SENSITIVE_NOTES_REJECTED", None),
    ("record_working_notes", json.dumps({"notes": "x" * (16 * 1024 + 1)}), "NOTES_TOO_LARGE", None),
    ("forget_everything", "{}", "UNKNOWN_TOOL", None),
])
def test_rejections_name_only_codes_and_fields(name, raw, code, errors):
    box, _ = _box()
    outcome = box.call(name, raw)
    assert outcome.rejected and outcome.code == code
    assert outcome.result["error"] == "MEMORY_TOOL_REJECTED" and outcome.result["code"] == code
    assert outcome.result.get("schema_errors") == errors
    assert SECRET_LOOKING not in json.dumps(outcome.result) and "walks" not in json.dumps(outcome.result)


def test_reads_serve_pages_and_null_offsets_mean_the_start(monkeypatch):
    # a page too small for the whole job (190 source bytes and a 26-byte document), so no read is
    # the complete first read and each tool serves its own page
    monkeypatch.setattr(reads_mod, "BULK_PAGE", 200)
    box, reads = _box()
    manifest = box.call("inspect_ingest", json.dumps({"handle": "ingest_7", "offset": None}))
    assert not manifest.rejected and manifest.result["blocks"][0]["evidence_ref"] == "ev_7"
    page = box.call("read_ingest", json.dumps({"handle": "ingest_7", "block": "b1", "offset": None}))
    assert page.result["next"] is None and reads.ingest_fully_read
    assert box.call("processing_state", "").result == {"complete": True, "read_bytes": 190, "total_bytes": 190}
    memory = box.call("inspect_memory", json.dumps({"handle": reads.snapshot_handle, "target": "profile", "offset": 0}))
    assert memory.result["text"] == "# Profile\n\n## Walks\nlong\n"
    notes = box.call("record_working_notes", json.dumps({"notes": "read all; nothing new"}))
    assert notes.result == {"recorded": True, "bytes": 21} and box.notes == "read all; nothing new"


def test_after_the_complete_first_read_a_read_returns_no_text_again_but_is_still_checked():
    box, reads = _box()
    first = box.call("inspect_ingest", json.dumps({"handle": "ingest_7", "offset": None})).result
    assert first["complete"] is True and first["memory"][0]["text"] == "# Profile\n\n## Walks\nlong\n"
    for name, args in (("read_ingest", {"handle": "ingest_7", "block": "b1", "offset": 0}),
                       ("read_ingest", {"handle": None, "block": None, "offset": 0}),
                       ("inspect_memory", {"handle": reads.snapshot_handle, "target": None, "offset": 0}),
                       ("inspect_memory", {"handle": reads.snapshot_handle, "target": "profile", "offset": 0})):
        assert box.call(name, json.dumps(args)).result == tools.ALREADY_RETURNED, name
    bad = box.call("inspect_memory", json.dumps({"handle": "snapshot_x", "target": None, "offset": 0}))
    assert bad.rejected and bad.code == "INVALID_SNAPSHOT_HANDLE", "a wrong handle is still refused"
    assert box.call("processing_state", "").result["complete"] is True


def test_contract_rejection_carries_path_and_rule_then_first_acceptance_wins():
    calls = []

    def accept(payload, reads):
        calls.append(payload)
        if payload.get("request_id") != "job-1":
            raise contract.DecisionRejected("INVALID_REQUEST_REFERENCE", "m", {"path": "$.request_id", "rule": "r"})
        return ("accepted", {})

    box, reads = _box(accept)
    bad = box.call("submit_memory_decision", json.dumps({"request_id": "nope"}))
    assert bad.rejected and bad.result["schema_errors"] == [{"path": "$.request_id", "rule": "r"}]
    good = box.call("submit_memory_decision", json.dumps({"request_id": "job-1"}))
    assert good.submitted and good.result == {"submitted": True, "committed": False}
    again = box.call("submit_memory_decision", json.dumps({"request_id": "job-1"}))
    assert again.rejected and again.code == "DECISION_ALREADY_SUBMITTED" and len(calls) == 2
    assert reads.submission == ("accepted", {})


def test_sensitive_result_and_lost_lease_end_the_attempt():
    def accept(payload, reads):
        raise CmError("SENSITIVE_CONTENT_REJECTED", "found")

    box, _ = _box(accept)
    with pytest.raises(CmError) as caught:
        box.call("submit_memory_decision", "{}")
    assert caught.value.code == "SENSITIVE_CONTENT_REJECTED"
    box, _ = _box(lease_ok=False)
    with pytest.raises(CmError) as caught:
        box.call("inspect_ingest", json.dumps({"handle": "ingest_7", "offset": 0}))
    assert caught.value.code == "STALE_LEASE"


def _bulk_port() -> ReadPort:
    texts = ["Schön " * 25, "", "I use Nix flakes."]
    sources = [Source(n + 1, text, "global", "user_explicit", "codex_user_delivery", "2026-11-30T00:00:00.000Z")
               for n, text in enumerate(texts)]
    snapshot = {"profile": sections.parse("profile", b"# Profile\n\n## Walks\n" + b"long " * 30 + b"\n"),
                "preferences": sections.parse("preferences", b"# Preferences\n\n## Tabs\nalways\n")}
    return ReadPort("job-1", sources, snapshot, frozenset({"global"}), lambda p, r: ("ok", {}), lambda: None)


def test_bulk_read_pages_every_block_in_order_and_counts_as_coverage(monkeypatch):


    monkeypatch.setattr(reads_mod, "BULK_PAGE", 102)  # byte 102 is inside an "ö": the page ends before it
    reads = _bulk_port()
    box = tools.Toolbox(reads, contract.decision_json_schema(False))
    pieces: dict[str, list[str]] = {}
    offset, pages = 0, []
    while offset is not None:
        page = box.call("read_ingest", json.dumps({"handle": None, "block": None, "offset": offset}))
        assert not page.rejected and page.result["offset"] == offset
        assert not reads.ingest_fully_read or page.result["next"] is None, "coverage is complete only at the end"
        for block in page.result["blocks"]:
            assert block["evidence_ref"] == "ev_" + block["handle"].split("_")[1] and block["role"] == "user"
            pieces.setdefault(block["handle"], []).append(block["text"])
        pages.append(sum(len(b["text"].encode()) for b in page.result["blocks"]))
        offset = page.result["next"]
    assert reads.ingest_fully_read and pages == [101, 175 - 101 + 17]
    assert {h: "".join(t) for h, t in pieces.items()} == {h: s.text for h, s in reads.sources.items()}
    assert list(pieces) == ["ingest_1", "ingest_2", "ingest_3"], "task order, an empty block included"
    assert box.call("processing_state", "").result["complete"] is True


def test_bulk_read_keeps_the_contiguity_rule(monkeypatch):


    monkeypatch.setattr(reads_mod, "BULK_PAGE", 102)
    reads = _bulk_port()
    first = reads.read_ingest_all(0)
    assert first["blocks"][0]["next"] == first["next"] < len(reads.sources["ingest_1"].data)
    with pytest.raises(CmError) as caught:
        reads.read_ingest_all(first["next"] + 7)  # skips bytes of the first block
    assert caught.value.code == "NONCONTIGUOUS_READ"
    with pytest.raises(CmError) as caught:
        reads.read_ingest_all(first["next"] + 1)  # inside a two-byte character
    assert caught.value.code == "INVALID_PAGE_OFFSET"
    # A block read on with its own pages from where the bulk page stopped is covered the same way.
    rest = reads.read_ingest("ingest_1", "b1", first["next"])
    assert rest["next"] is None and not reads.ingest_fully_read
    reads.read_ingest("ingest_3", "b1", 0)
    assert reads.ingest_fully_read


def test_manifest_carries_document_text_and_marks_what_it_served_as_read(monkeypatch):


    reads = _bulk_port()
    manifest = reads.inspect_memory(reads.snapshot_handle)
    docs = {d["target"]: d for d in manifest["documents"]}
    assert docs["profile"]["text"].encode() == reads.snapshot["profile"].data and docs["profile"]["next"] is None
    assert reads.fully_read_targets == {"profile", "preferences"}
    monkeypatch.setattr(reads_mod, "BULK_PAGE", 60)
    reads = _bulk_port()
    docs = {d["target"]: d for d in reads.inspect_memory(reads.snapshot_handle)["documents"]}
    assert len(docs["profile"]["text"].encode()) == 60 and docs["profile"]["next"] == 60
    assert "text" not in docs["preferences"] and docs["preferences"]["next"] == 0, "the page budget was spent"
    assert reads.fully_read_targets == frozenset(), "nothing counts as read before its end"
    with pytest.raises(CmError) as caught:
        reads.inspect_memory(reads.snapshot_handle, "profile", 120)
    assert caught.value.code == "NONCONTIGUOUS_READ"
    assert reads.inspect_memory(reads.snapshot_handle, "profile", 60)["next"] == 120, "pages are BULK_PAGE long"
    assert reads.inspect_memory(reads.snapshot_handle, "profile", 120)["next"] is None
    assert reads.inspect_memory(reads.snapshot_handle, "preferences", 0)["next"] is None
    assert reads.fully_read_targets == {"profile", "preferences"}
