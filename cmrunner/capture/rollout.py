"""Codex rollout (transcript JSONL) parser: complete lines in, normalized records out, fail-closed.

Contract (reference-facts §6.2, hosts.md §1.8, checked against real Codex 0.169.0 and 0.153.4 captures
in ``tests/fixtures/codex``):
- ``parse(body, start, open_turn)`` reads complete JSONL lines of one transcript; ``start`` is the byte
  offset of ``body`` in the file, so every record carries its absolute offset and message ids are
  ``rollout-<offset>`` (stable across retries). ``open_turn`` is the turn known to be open at ``start``
  (Codex writes ``task_started`` before SessionStart fires, so the consumer seeds it from the
  UserPromptSubmit turn id).
- Every row needs a ``type`` string, an object ``payload`` and a valid UTC ``timestamp``. Row types,
  ``event_msg`` discriminants, ``item_completed`` item types, user input part types and
  ``response_item`` types and roles are explicit allowlists; anything else is
  ``CODEX_UNKNOWN_TRANSCRIPT``. A ``session_meta`` whose ``cli_version`` is not a strict ``x.y.z`` or is
  older than 0.153.4 is ``CODEX_UNSUPPORTED_VERSION``. There is no upper bound (the specification sets
  none): a newer Codex is admitted, and whatever it writes that cm does not know fails closed record by
  record through the allowlists above, exactly as on a verified version.
- User evidence (``UserDelivery``) comes only from ``event_msg/item_completed`` items of type
  ``UserMessage`` (text parts concatenated, as Codex builds the UserPromptSubmit prompt) and legacy
  ``event_msg/user_message``, both only inside the open turn with the same turn id.
  ``response_item`` user messages (environment context, hook prompts, turn-aborted notes), developer
  messages (cm's own ``hooks.additional_context``), ``compacted`` summaries and
  replacement history, ``retained_context`` and ``HookPrompt`` items are never evidence.
- Assistant text comes from ``item_completed/AgentMessage`` only: the ``response_item`` assistant
  message duplicates it, and a compaction summary is written *only* as a ``response_item``
  assistant message, so that source would turn summaries into assistant context.
- Tool output context comes from ``response_item`` ``function_call_output``/``custom_tool_call_output``.
- ``task_complete``/``turn_complete`` settle the open turn (``interrupted`` when it carries an error),
  ``turn_aborted`` interrupts it; a completion for any other turn, or with a bad timestamp, is
  ``CODEX_UNKNOWN_COMPLETION``. A start while another turn is open is ``CODEX_UNSETTLED_TURN``.
- Error messages name a record type and a byte offset, never transcript text.
Stdlib only (it runs in the drain's hot loop).
"""

from __future__ import annotations

import re

from cmrunner.core import strictjson
from cmrunner.core.errors import CmError

# Oldest release the reference accepted. Newer releases are admitted without an upper bound; the
# newest release line whose real captures the allowlists were checked against is recorded only to
# say so in documentation and tests, never to refuse a session.
SUPPORTED_MIN_VERSION = (0, 153, 4)
VERIFIED_MAX_RELEASE = (0, 169)
UNKNOWN = "CODEX_UNKNOWN_TRANSCRIPT"
UNKNOWN_COMPLETION = "CODEX_UNKNOWN_COMPLETION"
UNSUPPORTED_VERSION = "CODEX_UNSUPPORTED_VERSION"
UNSETTLED_TURN = "CODEX_UNSETTLED_TURN"
CODES = frozenset({UNKNOWN, UNKNOWN_COMPLETION, UNSUPPORTED_VERSION, UNSETTLED_TURN})

ROW_TYPES = frozenset({"session_meta", "event_msg", "response_item", "turn_context", "compacted",
                       "world_state", "token_usage_record", "retained_context"})
TURN_STARTS = frozenset({"task_started", "turn_started"})
TURN_COMPLETIONS = frozenset({"task_complete", "turn_complete"})
# event_msg discriminants. Observed in 0.153.4/0.169.0 captures: task_started, task_complete,
# turn_aborted, item_completed, token_count, thread_settings_applied. The rest are the variants
# upstream's rollout persistence policy writes (some only in older or extended modes); all of
# them except the turn lifecycle, item_completed and user_message carry nothing cm uses.
EVENT_TYPES = TURN_STARTS | TURN_COMPLETIONS | frozenset({
    "turn_aborted", "item_completed", "user_message", "token_count", "thread_settings_applied",
    "agent_message", "agent_reasoning", "agent_reasoning_raw_content", "context_compacted",
    "patch_apply_end", "mcp_tool_call_end", "exec_command_end", "web_search_end", "image_generation_end",
    "view_image_tool_call", "entered_review_mode", "exited_review_mode", "thread_rolled_back",
    "thread_goal_updated", "sub_agent_activity", "error", "warning",
})
# TurnItem variants (upstream codex-rs/protocol items.rs). Observed: UserMessage, AgentMessage,
# CommandExecution, McpToolCall, ContextCompaction, HookPrompt (a Stop hook's continuation prompt).
ITEM_TYPES = frozenset({"UserMessage", "HookPrompt", "AgentMessage", "Plan", "Reasoning", "CommandExecution",
                        "DynamicToolCall", "CollabAgentToolCall", "SubAgentActivity", "WebSearch", "ImageView",
                        "Sleep", "ImageGeneration", "FileChange", "McpToolCall", "ContextCompaction"})
USER_INPUT_TYPES = frozenset({"text", "image", "local_image", "audio", "local_audio", "skill", "mention"})
STRUCTURED_INPUT_TYPES = frozenset({"skill", "mention"})  # invocations, not content: no text, no media
RESPONSE_TYPES = frozenset({"message", "function_call", "function_call_output", "custom_tool_call",
                            "custom_tool_call_output", "reasoning", "local_shell_call", "web_search_call",
                            "image_generation_call", "tool_search_call", "tool_search_output", "compaction",
                            "context_compaction", "additional_tools", "agent_message"})
TOOL_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})

_VERSION = re.compile(r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_MAX_ID = 256


class _Record:
    """An immutable value: fields in ``__slots__``, compared and shown field by field."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, *values: object) -> None:
        if len(values) != len(self.__slots__):
            raise TypeError(f"{type(self).__name__} takes {len(self.__slots__)} fields")
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._fields() == self._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({inner})"


class SessionMeta(_Record):
    """The rollout header: thread id and the Codex version that wrote it."""

    __slots__ = ("offset", "at", "thread_id", "cli_version")
    offset: int
    at: str
    thread_id: str
    cli_version: str


class TurnStarted(_Record):
    __slots__ = ("offset", "at", "turn_id")
    offset: int
    at: str
    turn_id: str


class UserDelivery(_Record):
    """What the user typed in one turn: evidence once it matches that turn's prompt candidate.

    ``unsupported_content``: images or audio came with it, so the text alone is not the whole message.
    ``source``: ``"item"`` (item_completed/UserMessage) or ``"legacy_event"`` (event_msg/user_message).
    """

    __slots__ = ("offset", "at", "turn_id", "message_id", "text", "unsupported_content", "source")
    offset: int
    at: str
    turn_id: str
    message_id: str
    text: str
    unsupported_content: bool
    source: str


class AssistantText(_Record):
    __slots__ = ("offset", "at", "turn_id", "message_id", "text")
    offset: int
    at: str
    turn_id: str
    message_id: str
    text: str


class ToolOutput(_Record):
    __slots__ = ("offset", "at", "turn_id", "message_id", "call_id", "text")
    offset: int
    at: str
    turn_id: str
    message_id: str
    call_id: str
    text: str


class TurnSettled(_Record):
    """``outcome``: ``"settled"`` or ``"interrupted"``."""

    __slots__ = ("offset", "at", "turn_id", "outcome")
    offset: int
    at: str
    turn_id: str
    outcome: str


Record = SessionMeta | TurnStarted | UserDelivery | AssistantText | ToolOutput | TurnSettled


class RolloutError(CmError):
    """The transcript holds something the parser does not accept; nothing of it is used."""


def _label(value: object) -> str:
    """A safe name for an offending type: identifiers only, so no transcript text leaks."""
    return repr(value) if isinstance(value, str) and _NAME.fullmatch(value) else "a non-identifier value"


def _fail(code: str, what: str, offset: int) -> RolloutError:
    advice = {
        UNKNOWN: "this Codex transcript is not in a format cm knows; nothing from it was captured",
        UNKNOWN_COMPLETION: "the transcript completes a turn cm did not see start; nothing from it was captured",
        UNSUPPORTED_VERSION: "cm supports Codex 0.153.4 and later; update Codex",
        UNSETTLED_TURN: "the transcript starts a turn while another is open; nothing from it was captured",
    }[code]
    return RolloutError(code, f"{what} at byte {offset}: {advice}")


def parse_version(value: object) -> tuple[int, int, int] | None:
    """A strict ``x.y.z`` version (no prefix, suffix or leading zeros), or None."""
    if not isinstance(value, str):
        return None
    match = _VERSION.fullmatch(value)
    return None if match is None else (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def supported(version: tuple[int, int, int]) -> bool:
    """Whether cm admits transcripts of this Codex version: the minimum and anything newer."""
    return version >= SUPPORTED_MIN_VERSION


def _valid_clock(value: str) -> bool:
    """Calendar check of ``YYYY-MM-DDThh:mm:ss``, without importing datetime/_strptime (hot path)."""
    year, month, day = int(value[0:4]), int(value[5:7]), int(value[8:10])
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    if not (1 <= month <= 12 and hour < 24 and minute < 60 and second < 60):
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    return 1 <= day <= days


def _timestamp(row: dict, code: str, offset: int) -> str:
    value = row.get("timestamp")
    if isinstance(value, str) and _TIMESTAMP.fullmatch(value) and _valid_clock(value):
        return value
    raise _fail(code, "a record without a valid UTC timestamp", offset)


def _id(value: object, what: str, code: str, offset: int) -> str:
    if isinstance(value, str) and value and len(value) <= _MAX_ID:
        return value
    raise _fail(code, f"{what} without a valid id", offset)


def _row(line: bytes, offset: int) -> dict:
    try:  # strict: no NaN or 1e400, no lone surrogate (text that cannot be stored), bounded depth
        row = strictjson.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, strictjson.Rejected):
        raise _fail(UNKNOWN, "a line that is not strict JSON", offset) from None
    if not isinstance(row, dict) or not isinstance(row.get("type"), str) or not isinstance(row.get("payload"), dict):
        raise _fail(UNKNOWN, "a row without a type and an object payload", offset)
    if row["type"] not in ROW_TYPES:
        raise _fail(UNKNOWN, f"row type {_label(row['type'])}", offset)
    return row


class _Parser:
    """State across the lines of one call: the open turn and the records so far."""

    def __init__(self, open_turn: str | None) -> None:
        self.open_turn = open_turn
        self.records: list[Record] = []

    def row(self, row: dict, offset: int) -> None:
        kind, payload = row["type"], row["payload"]
        if kind == "session_meta":
            self._session_meta(payload, _timestamp(row, UNKNOWN, offset), offset)
        elif kind == "event_msg":
            self._event(row, payload, offset)
        elif kind == "response_item":
            self._response_item(payload, _timestamp(row, UNKNOWN, offset), offset)
        else:
            _timestamp(row, UNKNOWN, offset)  # turn_context, compacted, world_state, …: never evidence

    def _session_meta(self, payload: dict, at: str, offset: int) -> None:
        version = parse_version(payload.get("cli_version"))
        if version is None or not supported(version):
            raise _fail(UNSUPPORTED_VERSION, "a session_meta of an unsupported Codex version", offset)
        thread = _id(payload.get("id"), "a session_meta", UNKNOWN, offset)
        self.records.append(SessionMeta(offset, at, thread, payload["cli_version"]))

    def _event(self, row: dict, payload: dict, offset: int) -> None:
        kind = payload.get("type")
        if kind not in EVENT_TYPES:
            raise _fail(UNKNOWN, f"event_msg type {_label(kind)}", offset)
        if kind in TURN_COMPLETIONS or kind == "turn_aborted":
            at = _timestamp(row, UNKNOWN_COMPLETION, offset)
            turn = payload.get("turn_id")
            if self.open_turn is None or turn != self.open_turn:
                raise _fail(UNKNOWN_COMPLETION, f"event_msg {kind} for a turn that is not open", offset)
            interrupted = kind == "turn_aborted" or payload.get("error") is not None
            self.records.append(TurnSettled(offset, at, turn, "interrupted" if interrupted else "settled"))
            self.open_turn = None
            return
        at = _timestamp(row, UNKNOWN, offset)
        if kind in TURN_STARTS:
            turn = _id(payload.get("turn_id"), f"event_msg {kind}", UNKNOWN, offset)
            if self.open_turn is not None and self.open_turn != turn:
                raise _fail(UNSETTLED_TURN, f"event_msg {kind}", offset)
            self.open_turn = turn
            self.records.append(TurnStarted(offset, at, turn))
        elif kind == "item_completed":
            self._item(payload, at, offset)
        elif kind == "user_message":
            self._legacy_user_message(payload, at, offset)

    def _turn_of(self, payload: dict, what: str, offset: int, required: bool) -> str:
        """The open turn, checked against the record's own turn id (required or optional)."""
        turn = payload.get("turn_id")
        if turn is None and not required and self.open_turn is not None:
            return self.open_turn
        turn = _id(turn, what, UNKNOWN, offset)
        if turn != self.open_turn:
            raise _fail(UNKNOWN, f"{what} outside its turn", offset)
        return turn

    def _item(self, payload: dict, at: str, offset: int) -> None:
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") not in ITEM_TYPES:
            found = item.get("type") if isinstance(item, dict) else None
            raise _fail(UNKNOWN, f"item_completed item type {_label(found)}", offset)
        kind = item["type"]
        if kind == "UserMessage":
            turn = self._turn_of(payload, "a UserMessage item", offset, required=True)
            text, unsupported = self._user_content(item.get("content"), offset)
            if text or unsupported:  # a bare skill or mention invocation carries nothing typed
                self.records.append(UserDelivery(offset, at, turn, f"rollout-{offset}", text, unsupported, "item"))
        elif kind == "AgentMessage":
            turn = self._turn_of(payload, "an AgentMessage item", offset, required=True)
            text = self._agent_content(item.get("content"), offset)
            if text:
                self.records.append(AssistantText(offset, at, turn, f"rollout-{offset}", text))

    @staticmethod
    def _user_content(content: object, offset: int) -> tuple[str, bool]:
        if not isinstance(content, list):
            raise _fail(UNKNOWN, "a UserMessage item without content", offset)
        texts: list[str] = []
        unsupported = False
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in USER_INPUT_TYPES:
                raise _fail(UNKNOWN, f"user input type {_label(kind)}", offset)
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    raise _fail(UNKNOWN, "a text input without text", offset)
                texts.append(part["text"])
            elif kind not in STRUCTURED_INPUT_TYPES:
                unsupported = True
        # Joined with nothing: Codex's UserPromptSubmit ``prompt`` for a multi-part input is the bare
        # concatenation (observed on 0.169.0 through app-server turn/start), and the delivery must
        # hash to that prompt's candidate digest. The reference's newline join would never match.
        return "".join(texts), unsupported

    @staticmethod
    def _agent_content(content: object, offset: int) -> str:
        if not isinstance(content, list):
            raise _fail(UNKNOWN, "an AgentMessage item without content", offset)
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "Text" or not isinstance(part.get("text"), str):
                found = part.get("type") if isinstance(part, dict) else None
                raise _fail(UNKNOWN, f"agent message part {_label(found)}", offset)
            texts.append(part["text"])
        return "".join(texts)

    def _legacy_user_message(self, payload: dict, at: str, offset: int) -> None:
        if self.open_turn is None:
            raise _fail(UNKNOWN, "a user_message outside a turn", offset)
        turn = self._turn_of(payload, "a user_message", offset, required=False)
        message = payload.get("message")
        if not isinstance(message, str):
            raise _fail(UNKNOWN, "a user_message without message text", offset)
        media = [payload.get(k) for k in ("images", "local_images")]
        if any(m is not None and not isinstance(m, list) for m in media):
            raise _fail(UNKNOWN, "a user_message with malformed attachments", offset)
        unsupported = any(bool(m) for m in media)
        if message or unsupported:
            self.records.append(
                UserDelivery(offset, at, turn, f"rollout-{offset}", message, unsupported, "legacy_event"))

    def _response_item(self, payload: dict, at: str, offset: int) -> None:
        kind = payload.get("type")
        if kind not in RESPONSE_TYPES:
            raise _fail(UNKNOWN, f"response_item type {_label(kind)}", offset)
        if kind == "message":
            if payload.get("role") not in ROLES or not isinstance(payload.get("content"), list):
                raise _fail(UNKNOWN, f"a message with role {_label(payload.get('role'))}", offset)
            return  # never evidence; assistant text is read from AgentMessage items (module docstring)
        if kind in TOOL_OUTPUT_TYPES:
            call = _id(payload.get("call_id"), f"a {kind}", UNKNOWN, offset)
            if self.open_turn is None:
                raise _fail(UNKNOWN, f"a {kind} outside a turn", offset)
            meta = payload.get("internal_chat_message_metadata_passthrough")
            turn = self._turn_of(meta if isinstance(meta, dict) else {}, f"a {kind}", offset, required=False)
            text = _tool_text(payload.get("output"), kind, offset)
            if text:
                self.records.append(ToolOutput(offset, at, turn, f"rollout-{offset}", call, text))


def _tool_text(output: object, kind: str, offset: int) -> str:
    """Text of a tool output: a string, a list of content parts, or an object with ``content``."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), (str, list)):
        return _tool_text(output["content"], kind, offset)
    if isinstance(output, list):
        texts = []
        for part in output:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _fail(UNKNOWN, f"a {kind} part without a type", offset)
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    raise _fail(UNKNOWN, f"a {kind} without output", offset)


def parse(body: bytes, start: int, open_turn: str | None = None) -> list[Record]:
    """Parse complete JSONL lines beginning at byte ``start`` of a rollout; see the module contract."""
    if body and not body.endswith(b"\n"):
        raise _fail(UNKNOWN, "a partial last line", start + len(body))
    parser = _Parser(open_turn)
    offset = start
    # Split on b"\n" only: Codex ends rows with LF, and offsets must count every other byte.
    for line in body[:-1].split(b"\n") if body else []:
        parser.row(_row(line, offset), offset)
        offset += len(line) + 1
    return parser.records


def open_turn_after(records: list[Record], open_turn: str | None) -> str | None:
    """The turn left open after ``records`` (parsed with ``open_turn`` as the starting state)."""
    for record in records:
        if isinstance(record, TurnStarted):
            open_turn = record.turn_id
        elif isinstance(record, TurnSettled):
            open_turn = None
    return open_turn


def session_meta(first_line: bytes) -> SessionMeta:
    """Validate a rollout's first line: a supported ``session_meta`` (what SessionStart checks)."""
    if first_line.count(b"\n") != 1:
        raise _fail(UNKNOWN, "a first line that is not exactly one line", 0)
    records = parse(first_line, 0)
    if len(records) != 1 or not isinstance(records[0], SessionMeta):
        raise _fail(UNKNOWN, "a first line that is not a session_meta", 0)
    return records[0]
