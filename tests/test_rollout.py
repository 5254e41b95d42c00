"""The Codex rollout parser against real Codex 0.169.0 / 0.153.4 transcripts and mutated variants.

The fixtures (``tests/fixtures/codex``, see its README) were captured from real ``codex exec`` runs
against the project's fake model; each ``<name>.hooks.jsonl`` holds the hook payloads Codex sent during
the run, so the ``UserPromptSubmit`` prompts there are the ground truth for what the user typed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cmrunner.capture import rollout
from cmrunner.capture.rollout import AssistantText, SessionMeta, ToolOutput, TurnSettled, TurnStarted, UserDelivery
from cmrunner.core.errors import CmError

FIXTURES = Path(__file__).parent / "fixtures" / "codex"
NAMES = sorted(p.name[:-len(".jsonl")] for p in FIXTURES.glob("*.jsonl") if not p.name.endswith(".hooks.jsonl"))
TS = "2026-11-30T01:02:51.697Z"
TURN = "01a229f9-e12a-75d2-8245-497c026e59ac"


def _body(name: str) -> bytes:
    return (FIXTURES / f"{name}.jsonl").read_bytes()


def _hooks(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.hooks.jsonl").read_text().splitlines()]


def _typed(name: str) -> list[tuple[str, str]]:
    """(turn id, prompt) of every UserPromptSubmit Codex sent during the capture."""
    return [(h["payload"]["turn_id"], h["payload"]["prompt"]) for h in _hooks(name)
            if h["payload"]["hook_event_name"] == "UserPromptSubmit"]


def _of(records: list, kind: type) -> list:
    return [r for r in records if isinstance(r, kind)]


def _line(kind: str, payload: object, ts: object = TS, **extra: object) -> bytes:
    row = {"type": kind, "payload": payload, **extra}
    if ts is not None:
        row["timestamp"] = ts
    return json.dumps(row).encode() + b"\n"


def _event(kind: str, ts: object = TS, **fields: object) -> bytes:
    return _line("event_msg", {"type": kind, **fields}, ts)


def _user_item(text: str, turn: str | None = TURN, parts: list | None = None) -> bytes:
    payload: dict = {"type": "item_completed", "item": {"type": "UserMessage", "id": "u1",
                                                        "content": parts or [{"type": "text", "text": text}]}}
    if turn is not None:
        payload["turn_id"] = turn
    return _line("event_msg", payload)


def _fails(code: str, body: bytes, start: int = 0, open_turn: str | None = None) -> str:
    with pytest.raises(CmError) as caught:
        rollout.parse(body, start, open_turn)
    assert caught.value.code == code, caught.value
    return caught.value.message


# --- real transcripts ---------------------------------------------------------------------------


def test_fixtures_cover_the_oldest_and_the_newest_verified_version():
    versions = {rollout.session_meta(_body(n).split(b"\n", 1)[0] + b"\n").cli_version for n in NAMES}
    assert versions == {"0.169.0", "0.153.4"}
    assert len(NAMES) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_deliveries_are_exactly_the_prompts_typed(name):
    records = rollout.parse(_body(name), 0)
    deliveries = [(d.turn_id, d.text) for d in _of(records, UserDelivery)]
    typed = _typed(name)
    if name.endswith("blocked"):
        assert typed and deliveries == [], "a prompt a hook blocked never reached the model: no evidence"
    else:
        assert deliveries == typed
    assert all(d.source == "item" for d in _of(records, UserDelivery)), "0.153.4+ writes no legacy user_message"
    started = [t.turn_id for t in _of(records, TurnStarted)]
    settled = [t.turn_id for t in _of(records, TurnSettled)]
    assert started == settled and len(started) == len(set(started))
    assert isinstance(records[0], SessionMeta)
    assert rollout.open_turn_after(records, None) is None


@pytest.mark.parametrize("name", NAMES)
def test_offsets_are_line_starts_and_ids_are_stable(name):
    body = _body(name)
    starts = {0}
    for index, byte in enumerate(body):
        if byte == 0x0A:
            starts.add(index + 1)
    records = rollout.parse(body, 0)
    for record in records:
        assert record.offset in starts
        if hasattr(record, "message_id"):
            assert record.message_id == f"rollout-{record.offset}"
    assert [r.offset for r in records] == sorted(r.offset for r in records)


@pytest.mark.parametrize("name", NAMES)
def test_hook_sized_chunks_parse_like_the_consumer_sees_them(name):
    """Chunks end where each hook saw the file end; the activation starts at the first SessionStart.

    Codex writes ``task_started`` before SessionStart fires, so the first chunk starts inside an open
    turn that the consumer knows from the UserPromptSubmit turn id.
    """
    body = _body(name)
    hooks = _hooks(name)
    cuts = [h["transcript_bytes_at_hook"] for h in hooks] + [len(body)]
    assert cuts == sorted(cuts)
    typed = _typed(name)
    open_turn: str | None = typed[0][0] if typed else None
    start = cuts[0]
    assert _of(rollout.parse(body[:start], 0), TurnStarted), "task_started precedes SessionStart"
    collected: list = []
    for end in cuts[1:]:
        chunk = rollout.parse(body[start:end], start, open_turn)
        open_turn = rollout.open_turn_after(chunk, open_turn)
        collected += chunk
        start = end
    whole = [r for r in rollout.parse(body, 0) if r.offset >= cuts[0]]
    assert collected == whole
    assert open_turn is None


def test_stop_and_interrupt_hooks_fire_before_the_turn_settles():
    """What makes the consumer's watch necessary: at Stop/Interrupt time the completion is not written."""
    for name in ("simple", "interrupted", "legacy-0.153.4-simple"):
        body = _body(name)
        for hook in _hooks(name):
            if hook["payload"]["hook_event_name"] in ("Stop", "Interrupt"):
                seen = rollout.parse(body[:hook["transcript_bytes_at_hook"]], 0)
                assert not _of(seen, TurnSettled)
        assert _of(rollout.parse(body, 0), TurnSettled)


@pytest.mark.parametrize("name", NAMES)
def test_injected_and_scaffolding_text_is_never_a_record(name):
    body = _body(name)
    assert b"<<<cm-fixture-context>>>" in body and b"hooks.additional_context" in body
    assert b"<environment_context>" in body
    texts = [r.text for r in rollout.parse(body, 0) if hasattr(r, "text")]
    for text in texts:
        for marker in ("<<<cm-fixture-context>>>", "<environment_context>", "<turn_aborted>", "<hook_prompt",
                       "<skills_instructions>", "Another language model started"):
            assert marker not in text


@pytest.mark.parametrize("name", [n for n in NAMES if not n.endswith("blocked")])
def test_assistant_text_comes_once_from_agent_message_items(name):
    body = _body(name)
    agent_items = []
    for line in body.splitlines():
        row = json.loads(line)
        payload = row["payload"]
        if row["type"] == "event_msg" and payload["type"] == "item_completed" and payload["item"]["type"] == "AgentMessage":
            agent_items.append(payload["item"]["content"][0]["text"])
    assert [a.text for a in _of(rollout.parse(body, 0), AssistantText)] == agent_items


@pytest.mark.parametrize("name", ["compaction", "legacy-0.153.4-compaction"])
def test_compaction_summary_and_replayed_history_are_not_context(name):
    body = _body(name)
    assert b'"type": "compacted"' in body.replace(b'"type":"compacted"', b'"type": "compacted"')
    assert b"Summary: the user ran an echo." in body  # written as a response_item assistant message
    records = rollout.parse(body, 0)
    assert [a.text for a in _of(records, AssistantText)] == ["Continuing after compaction."]
    assert len(_of(records, UserDelivery)) == 1, "the compaction's replacement history replays the prompt"


@pytest.mark.parametrize("name", ["interrupted", "legacy-0.153.4-interrupted"])
def test_interrupted_turn_settles_as_interrupted(name):
    records = rollout.parse(_body(name), 0)
    assert [s.outcome for s in _of(records, TurnSettled)] == ["interrupted"]
    assert not _of(records, AssistantText)


@pytest.mark.parametrize("name", ["image", "legacy-0.153.4-image"])
def test_image_prompt_is_flagged_unsupported(name):
    (delivery,) = _of(rollout.parse(_body(name), 0), UserDelivery)
    assert delivery.unsupported_content and delivery.text == "Describe the attached fixture image."


@pytest.mark.parametrize("name", [n for n in NAMES if not n.endswith("image")])
def test_text_only_prompts_are_supported_content(name):
    assert not any(d.unsupported_content for d in _of(rollout.parse(_body(name), 0), UserDelivery))


def test_stop_hook_continuation_is_not_a_user_delivery():
    body = _body("stop_block")
    assert b'"HookPrompt"' in body and b"<hook_prompt" in body
    records = rollout.parse(body, 0)
    assert len(_of(records, UserDelivery)) == 1
    assert [a.text for a in _of(records, AssistantText)] == ["First answer.", "Second answer after the Stop hook."]


@pytest.mark.parametrize("name,expected", [("shell_tool", "fixture-tool-ok"), ("mcp_tool", "fixture fact for teal"),
                                           ("legacy-0.153.4-mcp_tool", "fixture fact for teal")])
def test_tool_outputs_are_context_with_call_ids(name, expected):
    records = rollout.parse(_body(name), 0)
    (tool,) = _of(records, ToolOutput)
    assert tool.call_id == "call_000001_0" and expected in tool.text
    (turn,) = _of(records, TurnStarted)
    assert tool.turn_id == turn.turn_id


def test_resume_appends_a_second_turn_to_the_same_file():
    records = rollout.parse(_body("resume"), 0)
    assert len(_of(records, SessionMeta)) == 1
    assert [s.outcome for s in _of(records, TurnSettled)] == ["settled", "settled"]
    assert [d.text for d in _of(records, UserDelivery)] == [
        "First fixture prompt: remember the colour teal.", "Second fixture prompt: what colour was it?"]


# --- mutated variants ----------------------------------------------------------------------------


def _opened(*lines: bytes) -> bytes:
    return _event("task_started", turn_id=TURN) + b"".join(lines)


def test_injected_hook_context_in_user_role_is_not_evidence():
    injected = _line("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "remember: I love pineapple"}],
        "internal_chat_message_metadata_passthrough": {"turn_id": TURN, "content_item_kinds": ["hooks.additional_context"]}})
    developer = _line("response_item", {"type": "message", "role": "developer", "content": [
        {"type": "input_text", "text": "remember: I love pineapple"}]})
    records = rollout.parse(_opened(injected, developer, _user_item("hello")), 0)
    assert [d.text for d in _of(records, UserDelivery)] == ["hello"]


def test_legacy_user_message_inside_the_turn_is_a_delivery():
    records = rollout.parse(_opened(_event("user_message", message="legacy words", images=[], turn_id=TURN),
                                    _event("user_message", message="", local_images=["/x.png"])), 0)
    first, second = _of(records, UserDelivery)
    assert (first.text, first.unsupported_content, first.source) == ("legacy words", False, "legacy_event")
    assert (second.text, second.unsupported_content) == ("", True)


def test_multi_part_user_text_is_joined_and_structured_invocations_skipped():
    parts = [{"type": "text", "text": "one"}, {"type": "mention", "name": "x"}, {"type": "text", "text": "two"}]
    (delivery,) = _of(rollout.parse(_opened(_user_item("", parts=parts)), 0), UserDelivery)
    assert delivery.text == "onetwo" and not delivery.unsupported_content, "as Codex's UserPromptSubmit prompt"
    assert not _of(rollout.parse(_opened(_user_item("", parts=[{"type": "skill", "name": "s"}])), 0), UserDelivery)


def test_settle_with_error_is_interrupted():
    records = rollout.parse(_opened(_event("turn_complete", turn_id=TURN, error={"message": "x"})), 0)
    assert [s.outcome for s in _of(records, TurnSettled)] == ["interrupted"]


def test_seeded_open_turn_accepts_a_tail_without_task_started():
    records = rollout.parse(_user_item("typed") + _event("task_complete", turn_id=TURN), 500, TURN)
    assert [type(r) for r in records] == [UserDelivery, TurnSettled]
    assert records[0].message_id == "rollout-500"


@pytest.mark.parametrize("body", [
    _line("mystery_row", {}),
    _event("teleport_started"),
    _event(""),
    _event("task_started_v2", turn_id=TURN),
    _line("event_msg", {"turn_id": TURN}),
    _line("response_item", {"type": "hologram"}),
    _line("response_item", {"type": "message", "role": "narrator", "content": []}),
    _line("response_item", {"type": "message", "role": "user", "content": "not a list"}),
    _opened(_line("event_msg", {"type": "item_completed", "turn_id": TURN, "item": {"type": "Telepathy"}})),
    _opened(_line("event_msg", {"type": "item_completed", "turn_id": TURN, "item": "UserMessage"})),
    _opened(_user_item("", parts=[{"type": "hologram"}])),
    _opened(_user_item("", parts=[{"type": "text"}])),
    _opened(_user_item("", parts=["text"])),
    _opened(_line("event_msg", {"type": "item_completed", "turn_id": TURN,
                                "item": {"type": "AgentMessage", "content": [{"type": "Markdown", "text": "x"}]}})),
    _opened(_line("response_item", {"type": "function_call_output", "call_id": "c1", "output": 7})),
    _opened(_line("response_item", {"type": "function_call_output", "output": "no call id"})),
    b"not json\n",
    b"\n",
    b"[1, 2]\n",
    b'{"type": "event_msg"}\n',
    b'{"type": "event_msg", "payload": [1]}\n',
    b'{"type": 7, "payload": {}}\n',
    b'{"timestamp": "2026-11-30T01:02:51.697Z", "type": "event_msg", "payload": {"type": "token_count", "x": NaN}}\n',
    b'\xff\xfe{}\n',
    _event("token_count").rstrip(b"\n"),
])
def test_unknown_or_malformed_rows_fail_closed(body):
    _fails("CODEX_UNKNOWN_TRANSCRIPT", body)


def test_error_message_names_the_type_but_never_text():
    message = _fails("CODEX_UNKNOWN_TRANSCRIPT", _event("teleport_started") * 1)
    assert "'teleport_started'" in message and "byte 0" in message
    secret = _event("my password is hunter2")
    assert "hunter2" not in _fails("CODEX_UNKNOWN_TRANSCRIPT", secret)
    bad_json = b'{"type": "event_msg", "payload": {"text": "hunter2"}\n'
    assert "hunter2" not in _fails("CODEX_UNKNOWN_TRANSCRIPT", bad_json)
    offset_message = _fails("CODEX_UNKNOWN_TRANSCRIPT", _event("token_count") + _event("bogus"), start=1000)
    assert f"byte {1000 + len(_event('token_count'))}" in offset_message


@pytest.mark.parametrize("body,code", [
    (_event("task_started"), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_event("task_started", turn_id=""), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_event("task_started", turn_id=7), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_opened(_user_item("typed", turn=None)), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_opened(_user_item("typed", turn="another-turn")), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_user_item("typed"), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_event("user_message", message="outside any turn"), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_opened(_event("user_message", message="x", turn_id="another-turn")), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_opened(_line("response_item", {"type": "function_call_output", "call_id": "c", "output": "o",
                                     "internal_chat_message_metadata_passthrough": {"turn_id": "another"}})),
     "CODEX_UNKNOWN_TRANSCRIPT"),
    (_line("response_item", {"type": "function_call_output", "call_id": "c", "output": "o"}), "CODEX_UNKNOWN_TRANSCRIPT"),
    (_opened(_event("task_complete")), "CODEX_UNKNOWN_COMPLETION"),
    (_opened(_event("task_complete", turn_id="another-turn")), "CODEX_UNKNOWN_COMPLETION"),
    (_opened(_event("turn_aborted", turn_id="another-turn", reason="interrupted")), "CODEX_UNKNOWN_COMPLETION"),
    (_event("task_complete", turn_id=TURN), "CODEX_UNKNOWN_COMPLETION"),
    (_opened(_event("task_complete", turn_id=TURN), _event("task_complete", turn_id=TURN)), "CODEX_UNKNOWN_COMPLETION"),
    (_opened(_event("task_started", turn_id="second-turn")), "CODEX_UNSETTLED_TURN"),
])
def test_missing_or_mismatched_turn_ids(body, code):
    _fails(code, body)


@pytest.mark.parametrize("ts", [None, 1796000571, "", "2026-11-30T01:02:51", "2026-11-30 01:02:51Z",
                                "2026-13-30T01:02:51.697Z", "2026-02-30T01:02:51Z", "2026-11-30T25:02:51Z",
                                "2026-11-30T01:02:51.697+00:00", "2026-11-30T01:02:51.Z", " 2026-11-30T01:02:51Z",
                                "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-11-30T01:02:60Z",
                                "2026-11-31T01:02:51Z", "2026-00-10T01:02:51Z", "\u0662026-11-30T01:02:51Z"])
def test_bad_timestamps(ts):
    _fails("CODEX_UNKNOWN_COMPLETION", _opened(_event("task_complete", ts=ts, turn_id=TURN)))
    _fails("CODEX_UNKNOWN_TRANSCRIPT", _event("task_started", ts=ts, turn_id=TURN))
    _fails("CODEX_UNKNOWN_TRANSCRIPT", _event("token_count", ts=ts))
    _fails("CODEX_UNKNOWN_TRANSCRIPT", _opened(_line("event_msg", {"type": "item_completed", "turn_id": TURN, "item": {
        "type": "UserMessage", "content": [{"type": "text", "text": "x"}]}}, ts)))


@pytest.mark.parametrize("ts", ["2026-11-30T01:02:51.123456789Z", "2028-02-29T23:59:59Z", "2000-02-29T00:00:00.5Z",
                                "2026-12-31T00:00:00Z"])
def test_valid_timestamps(ts):
    (started,) = rollout.parse(_event("task_started", ts=ts, turn_id=TURN), 0)
    assert started.at == ts


def _meta(version: object) -> bytes:
    return _line("session_meta", {"id": "thread-1", "cli_version": version, "originator": "codex_exec"})


@pytest.mark.parametrize("version", ["0.153.4", "0.153.10", "0.160.0", "0.169.0", "0.169.12", "0.170.0",
                                     "0.171.3", "1.0.0", "12.0.7"])
def test_supported_versions(version):
    (meta,) = rollout.parse(_meta(version), 0)
    assert meta == SessionMeta(0, TS, "thread-1", version)


@pytest.mark.parametrize("version", ["0.153.3", "0.152.9", "0.0.1", "0.169.0-alpha.1", "1.0.0-beta",
                                     "v0.169.0", "0.169", "00.169.0", "0.169.00", "0.169.0 ", "", None, 169,
                                     ["0", "169", "0"]])
def test_unsupported_versions(version):
    message = _fails("CODEX_UNSUPPORTED_VERSION", _meta(version))
    assert "0.153.4 and later" in message


def test_session_meta_rules():
    _fails("CODEX_UNKNOWN_TRANSCRIPT", _line("session_meta", {"cli_version": "0.169.0"}))
    with pytest.raises(CmError) as caught:
        rollout.session_meta(_event("token_count"))
    assert caught.value.code == "CODEX_UNKNOWN_TRANSCRIPT"
    with pytest.raises(CmError) as caught:
        rollout.session_meta(_meta("0.169.0") + _event("token_count"))
    assert caught.value.code == "CODEX_UNKNOWN_TRANSCRIPT"
    assert rollout.session_meta(_meta("0.169.0")).thread_id == "thread-1"


def test_supported_range_has_a_minimum_and_no_upper_bound():
    assert rollout.supported(rollout.SUPPORTED_MIN_VERSION)
    assert not rollout.supported((0, 153, 3))
    assert rollout.supported((*rollout.VERIFIED_MAX_RELEASE, 99))
    assert rollout.supported((rollout.VERIFIED_MAX_RELEASE[0], rollout.VERIFIED_MAX_RELEASE[1] + 1, 0))
    assert rollout.supported((999999999, 0, 0))


# --- property: arbitrary lines parse or fail with one of the parser's codes ----------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)
known_names = st.sampled_from(sorted(rollout.EVENT_TYPES | rollout.ROW_TYPES | rollout.RESPONSE_TYPES
                                     | rollout.ITEM_TYPES | rollout.USER_INPUT_TYPES | rollout.ROLES) + ["x"])
turns = st.sampled_from([TURN, "other-turn", "", None])
timestamps = st.sampled_from([TS, "2026-02-30T00:00:00Z", None, 5])
parts = st.lists(st.fixed_dictionaries({"type": known_names}, optional={"text": json_values}), max_size=3)
payloads = st.fixed_dictionaries({"type": known_names}, optional={
    "turn_id": turns, "item": st.fixed_dictionaries({"type": known_names}, optional={"content": parts | json_values}),
    "role": known_names, "content": parts, "call_id": json_values, "output": json_values | parts,
    "message": json_values, "images": json_values, "cli_version": st.sampled_from(["0.169.0", "0.153.3", "x"]),
    "id": json_values, "error": json_values})
rows = st.builds(lambda kind, payload, ts: json.dumps({"timestamp": ts, "type": kind, "payload": payload}).encode(),
                 known_names, payloads | json_values, timestamps)
raw_lines = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b""))
PROPERTY = settings(max_examples=400, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY
@given(lines=st.lists(rows | raw_lines, min_size=1, max_size=8), start=st.integers(0, 10**9), open_turn=turns)
def test_arbitrary_lines_parse_or_fail_with_a_parser_code(lines, start, open_turn):
    body = b"\n".join(lines) + b"\n"
    try:
        records = rollout.parse(body, start, open_turn or None)
    except CmError as exc:
        assert exc.code in rollout.CODES
        assert "\n" not in exc.message
        return
    for record in records:
        assert start <= record.offset < start + len(body)
        if isinstance(record, UserDelivery):
            assert record.turn_id and (record.text or record.unsupported_content)
