"""The fake model's "diligent model" mode: drive cm's real Memory Agent tools from the conversation.

Contract:
- ``view(path, body)`` reads one request of any protocol (Responses ``input`` items, Chat
  ``messages``, Anthropic ``messages`` blocks, Gemini ``contents`` parts) and rebuilds what the model has seen: the task (the first user message that parses
  as a ``memory_task_v1``), every tool call with its arguments and its result, in order. A host's
  MCP prefix on a tool name is dropped (``base_name``) and an MCP result relayed whole is unwrapped;
  the answer names the tools as the request offered them (``offered_names``).
- ``next_calls(view, batch)`` is what a diligent model does next, as ``memory_agent.md`` asks:
  the bulk ``read_ingest`` (``handle`` and ``block`` null) from offset 0 following ``next`` until it
  is null, every block listed by an ``inspect_ingest`` read to its end, the ``inspect_memory``
  manifest (with its inline document text), then every non-empty document not yet read to its end,
  page by page from where the manifest stopped; an empty list means everything has been read. With ``batch`` every independent next call is returned at
  once (several calls in one turn), else only the first. ``reading="blocks"`` is the reference
  protocol's page-by-page reader instead of the bulk read: ``inspect_ingest`` of each bundle, then
  each listed block with ``read_ingest`` from offset 0 following ``next``.
- ``decide(view, policy)`` builds the ``submit_memory_decision`` arguments from a policy: a
  callable ``policy(state) -> body | [decisions]`` given ``{task, sources, documents, rejections,
  submissions}`` (sources carry the reassembled text). Built-ins: ``remember_user_turns`` (each
  current user turn becomes its own section in profile, or in the project's document),
  ``ignore``, ``invalid_then_remember`` (first a wrong ``request_id``, then the real decision),
  ``careful`` (``careful.py``: a rule-based reader of the eval phrasebook that files each statement
  under a topic heading in the right document) and one ``faulty_<class>`` per violation class
  (``faulty.py``: careful with exactly that class's mistake).
  ``load_policy("file.py:function" | "package.module:function" | builtin)`` resolves one. A policy
  may instead return ``{"reply": {...}}``: a reply of the script's shape (e.g. ``{"error":
  {"status": 401}}``) that the server sends in place of the submission, so a failure can depend on
  what the model was shown.
- ``Driver`` turns a ``{"policy": true}`` reply into the next concrete reply for the server,
  applying the script's ``inject`` cues (see ``fakemodel``) under a lock. A request that carries
  no ``memory_task_v1`` (``cm network-test``'s probe) is answered with the text ``OK``.
Stdlib only: it runs inside the fake server process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
from collections.abc import Callable

from cmrunner.synthetic import careful, faulty

Policy = Callable[[dict], object]
SUBMIT = "submit_memory_decision"
TOOLS = ("inspect_ingest", "read_ingest", "inspect_memory", "processing_state", "record_working_notes", SUBMIT)
READING_STYLES = ("bulk", "blocks")


def _parse(text: object) -> object:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class View:
    """What the model has seen so far in one request."""

    def __init__(self) -> None:
        self.task: dict | None = None
        self.calls: list[dict] = []  # {id, name, args, result}

    def results(self, name: str) -> list[tuple[dict, dict]]:
        """(args, result) of successful calls of one tool, in order."""
        return [(c["args"], c["result"]) for c in self.calls
                if c["name"] == name and isinstance(c["args"], dict) and isinstance(c["result"], dict)
                and "error" not in c["result"]]

    @property
    def submissions(self) -> list[dict]:
        return [c["result"] for c in self.calls if c["name"] == SUBMIT and isinstance(c["result"], dict)]

    def complete(self) -> dict | None:
        """The read that returned everything the job holds (``complete: true``), if one did."""
        return next((c["result"] for c in self.calls if c["name"] in TOOLS[:3] and isinstance(c["result"], dict)
                     and c["result"].get("complete") is True), None)

    @property
    def submitted(self) -> bool:
        return any(r.get("submitted") is True for r in self.submissions)


def _unwrap(value: object) -> object:
    """A tool result as the model saw it: an MCP ``CallToolResult`` relayed whole by a host (Codex,
    Gemini CLI) is reduced to its structured content, or to the JSON of its first text part."""
    if isinstance(value, str):
        text = value
        value = _parse(text)
        if value is None and "{" in text:  # Gemini CLI wraps a result in <untrusted_context> lines
            value = _parse(text[text.index("{"):text.rindex("}") + 1])
    if isinstance(value, list):  # content parts (Codex prefixes one with the call's wall time)
        parsed = [_parse(p.get("text")) for p in value if isinstance(p, dict)]
        return next((p for p in parsed if isinstance(p, dict)), None)
    if isinstance(value, dict) and isinstance(value.get("content"), list) and "error" not in value:
        if isinstance(value.get("structuredContent"), dict):
            return value["structuredContent"]
        return _parse(_content_text(value["content"]))
    if isinstance(value, dict) and set(value) == {"output"}:
        return _unwrap(value["output"])
    return value


def base_name(name: object) -> object:
    """A tool name without the host's MCP prefix (``mcp__cm__read_ingest``, Gemini's
    ``mcp_cm_read_ingest`` → ``read_ingest``)."""
    if isinstance(name, str) and name not in TOOLS:
        for tool in TOOLS:
            if name.endswith("_" + tool):
                return tool
    return name


def view(path: str, body: object) -> View:
    seen = View()
    by_id: dict[str, dict] = {}

    def user(text: str, parts: list | None = None) -> None:
        candidates: list[object] = [text] + [p.get("text") for p in parts or [] if isinstance(p, dict)]
        for candidate in candidates:
            parsed = _parse(candidate.strip() if isinstance(candidate, str) else candidate)
            if seen.task is None and isinstance(parsed, dict) and parsed.get("version") == "memory_task_v1":
                seen.task = parsed

    def call(call_id: object, name: object, arguments: object) -> None:
        parsed = arguments if isinstance(arguments, dict) else _parse(arguments)
        entry = {"id": str(call_id), "name": base_name(name), "args": parsed, "result": None}
        seen.calls.append(entry)
        by_id[str(call_id)] = entry

    def result(call_id: object, output: object) -> None:
        entry = by_id.get(str(call_id))
        if entry is not None:
            entry["result"] = _unwrap(output)

    request = body if isinstance(body, dict) else {}
    if path.endswith("/responses"):
        for item in request.get("input") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                call(item.get("call_id"), item.get("name"), item.get("arguments"))
            elif item.get("type") == "function_call_output":
                result(item.get("call_id"), item.get("output"))
            elif item.get("role") == "user":
                user(_content_text(item.get("content")), item.get("content") if isinstance(item.get("content"), list)
                     else None)
    elif path.endswith("/messages"):  # Anthropic Messages (Claude Code)
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            if message.get("role") == "user":
                user(content if isinstance(content, str) else "", blocks)
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        result(block.get("tool_use_id"), _content_text(block.get("content")))
            elif message.get("role") == "assistant":
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        call(block.get("id"), block.get("name"), block.get("input"))
    elif ":" in path.rsplit("/", 1)[-1]:  # Gemini generateContent (Gemini CLI): calls and responses pair in order
        waiting: list[str] = []
        for content in request.get("contents") or []:
            for part in (content.get("parts") or []) if isinstance(content, dict) else []:
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str) and content.get("role") == "user":
                    user(part["text"])
                elif isinstance(part.get("functionCall"), dict):
                    call_id = f"g{len(seen.calls)}"
                    call(call_id, part["functionCall"].get("name"), part["functionCall"].get("args"))
                    waiting.append(call_id)
                elif isinstance(part.get("functionResponse"), dict) and waiting:
                    result(waiting.pop(0), part["functionResponse"].get("response"))
    else:
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "user":
                user(_content_text(message.get("content")))
            elif message.get("role") == "assistant":
                for tc in message.get("tool_calls") or []:
                    function = tc.get("function") or {}
                    call(tc.get("id"), function.get("name"), function.get("arguments"))
            elif message.get("role") == "tool":
                result(message.get("tool_call_id"), _content_text(message.get("content")))
    return seen


def offered_names(body: object) -> dict[str, dict]:
    """How the request names each Memory Agent tool: base name → ``{name, namespace?}``. A host
    prefixes MCP tools (``mcp__cm__read_ingest``) or groups them in a namespace (Codex); a request
    that offers none maps every tool to itself."""
    found: dict[str, dict] = {}
    request = body if isinstance(body, dict) else {}
    offered = request.get("tools")
    tools: list = offered if isinstance(offered, list) else []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool["tools"]:
                name = inner.get("name") if isinstance(inner, dict) else None
                if base_name(name) in TOOLS:
                    found[str(base_name(name))] = {"name": name, "namespace": tool.get("name")}
            continue
        for declared in [tool, tool.get("function")] + list(tool.get("functionDeclarations") or []):
            name = declared.get("name") if isinstance(declared, dict) else None
            if base_name(name) in TOOLS:
                found[str(base_name(name))] = {"name": name}
    return found


def _pages(results: list[tuple[dict, dict]], match: Callable[[dict], bool]) -> list[dict]:
    return sorted((r for a, r in results if match(a)), key=lambda r: r.get("offset") or 0)


def _next_offset(pages: list[dict]) -> int | None:
    """Where reading continues: 0 before any page, the last page's ``next``, or None at the end."""
    if not pages:
        return 0
    return pages[-1].get("next")


def _bulk(args: dict) -> bool:
    return args.get("handle") is None and args.get("block") is None


def _of_target(target: str) -> Callable[[dict], bool]:
    return lambda args: args.get("target") == target


def _documents(seen: View) -> tuple[dict | None, dict[str, list[dict]]]:
    """The snapshot manifest (or None) and each document's pages: inline manifest text, then target reads."""
    memory = seen.results("inspect_memory")
    manifest = next((r for a, r in memory if a.get("target") is None and "documents" in r), None)
    everything = seen.complete()
    if manifest is None and everything is not None:
        manifest = {"documents": everything.get("memory") or everything.get("documents") or []}
    pages: dict[str, list[dict]] = {}
    for doc in (manifest or {}).get("documents") or []:
        inline = [{"offset": 0, "text": doc["text"], "next": doc.get("next")}] if isinstance(doc.get("text"), str) else []
        pages[doc["target"]] = inline + _pages(memory, _of_target(doc["target"]))
    return manifest, pages


def next_calls(seen: View, batch: bool = False, reading: str = "bulk") -> list[tuple[str, dict]]:
    task = seen.task or {}
    calls: list[tuple[str, dict]] = []
    if seen.complete() is not None:
        return calls  # one read returned every source and document the job holds
    reads = seen.results("read_ingest")
    if reading == "blocks":
        # The reference protocol's reader: each bundle's block list, then each block page by page.
        listed = {a.get("handle") for a, _page in seen.results("inspect_ingest")}
        calls += [("inspect_ingest", {"handle": b["ingest_id"], "offset": 0}) for b in task.get("bundles") or []
                  if b.get("ingest_id") not in listed]
    elif task.get("bundles"):
        at = _next_offset(_pages(reads, _bulk))
        if at is not None:
            calls.append(("read_ingest", {"handle": None, "block": None, "offset": at}))
    # Blocks listed through inspect_ingest (a model may also read one block at a time) are read to their end.
    for _args, page in seen.results("inspect_ingest"):
        for block in page.get("blocks") or []:
            handle, bid = page["handle"], block["block_id"]
            at = _source_next(reads, handle, bid)
            if at is not None:
                calls.append(("read_ingest", {"handle": handle, "block": bid, "offset": at}))
    snapshot = (task.get("snapshot") or {}).get("handle")
    manifest, pages = _documents(seen)
    if snapshot and manifest is None:
        calls.append(("inspect_memory", {"handle": snapshot, "target": None, "offset": 0}))
    for doc in (manifest or {}).get("documents") or []:
        if doc.get("bytes", 0) == 0:
            continue
        ordered = sorted(pages[doc["target"]], key=lambda r: r.get("offset") or 0)
        at = _next_offset(ordered) if ordered else doc.get("next", 0)
        if at is not None:
            calls.append(("inspect_memory", {"handle": snapshot, "target": doc["target"], "offset": at}))
    return calls if batch else calls[:1]


def _source_pieces(reads: list[tuple[dict, dict]], everything: dict | None = None) -> dict[tuple[str, str], dict]:
    """Every block seen, in first-seen order: its descriptor fields and text pieces by offset
    (``everything``: a read that returned all sources in ``sources``, as bulk entries)."""
    blocks: dict[tuple[str, str], dict] = {}
    pages = list(reads) + ([({"handle": None, "block": None}, {"blocks": everything["sources"]})]
                           if everything is not None and isinstance(everything.get("sources"), list) else [])
    for args, page in pages:
        if _bulk(args):
            for entry in page.get("blocks") or []:
                key = (entry["handle"], entry["block_id"])
                info = blocks.setdefault(key, {"evidence_ref": entry.get("evidence_ref"),
                                               "context_only": entry.get("evidence_ref") is None,
                                               "metadata": {k: entry[k] for k in ("role", "turn_id", "observed_at")
                                                            if k in entry}, "pieces": {}})
                info["pieces"][entry.get("offset") or 0] = (entry.get("text", ""), entry.get("next"))
        else:
            key = (args.get("handle"), args.get("block"))
            info = blocks.setdefault(key, {"evidence_ref": None, "context_only": False, "metadata": {}, "pieces": {}})
            info["pieces"][page.get("offset") or 0] = (page.get("text", ""), page.get("next"))
    return blocks


def _source_next(reads: list[tuple[dict, dict]], handle: str, block: str) -> int | None:
    """Where one block's reading continues (0 before any piece, None at its end)."""
    info = _source_pieces(reads).get((handle, block))
    if info is None:
        return 0
    return info["pieces"][max(info["pieces"])][1]


def policy_state(seen: View) -> dict:
    """What a policy decides from: the task, reassembled sources and documents, earlier rejections."""
    blocks = _source_pieces(seen.results("read_ingest"), seen.complete())
    for _args, page in seen.results("inspect_ingest"):
        for block in page.get("blocks") or []:
            info = blocks.setdefault((page["handle"], block["block_id"]), {"pieces": {}})
            info.update({"evidence_ref": block.get("evidence_ref"), "context_only": block.get("context_only", False),
                         "metadata": block.get("metadata") or {}})
    sources = [{"handle": handle, "block": bid, "evidence_ref": info["evidence_ref"], "context_only": info["context_only"],
                "metadata": info["metadata"], "text": "".join(info["pieces"][k][0] for k in sorted(info["pieces"]))}
               for (handle, bid), info in blocks.items()]
    manifest, pages = _documents(seen)
    documents = {}
    for doc in (manifest or {"documents": []})["documents"]:
        unique = {p.get("offset") or 0: p.get("text", "") for p in pages[doc["target"]]}
        documents[doc["target"]] = {**doc, "text": "".join(unique[k] for k in sorted(unique))}
    rejections = [r for r in seen.submissions if "error" in r]
    return {"task": seen.task, "sources": sources, "documents": documents, "rejections": rejections,
            "submissions": len(seen.submissions)}


def _escape_headings(text: str) -> str:
    lines = [("\\" + line) if line.lstrip().startswith("#") else line for line in text.strip().splitlines()]
    return "\n".join(lines) + "\n"


def remember_user_turns(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]
    scope = (state["task"]["bundles"] or [{}])[0].get("scope", "global")
    target = "profile" if scope == "global" else scope
    existing = {s["title"]: s["ref"] for s in state["documents"].get(target, {}).get("sections", [])}
    ops = []
    for source in current:
        if source["metadata"].get("role") != "user" or not source["text"].strip():
            continue
        title = f"User turn {source['evidence_ref'][3:]}"
        ops.append({"op": "put_section", "target": target, "section": existing.get(title), "title": title,
                    "body": _escape_headings(source["text"])})
    evidence = [s["evidence_ref"] for s in current]
    if not ops:
        return ignore(state)
    return [{"kind": "retain", "applicability": "global" if scope == "global" else "project", "confidence": 0.9,
             "evidence": evidence, "reason": "the user stated it", "admission": "remember", "lifetime": "stable",
             "operations": ops}]


def ignore(state: dict) -> object:
    evidence = [s["evidence_ref"] for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]
    # In the schema's one shape, as a strict-mode model writes it: the fields ignore has no use for are null.
    return [{"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": evidence,
             "reason": "nothing worth keeping", "admission": None, "lifetime": None, "operations": None}]


def invalid_then_remember(state: dict) -> object:
    decisions = remember_user_turns(state)
    body = {"version": "memory_maintenance_v2", "request_id": state["task"]["request_id"], "decisions": decisions}
    if not state["rejections"]:
        body["request_id"] = "not-the-request-id"
    return body


BUILTINS: dict[str, Policy] = {"remember_user_turns": remember_user_turns, "ignore": ignore,
                               "invalid_then_remember": invalid_then_remember, "careful": careful.careful,
                               **faulty.FAULTY}


def load_policy(spec: str) -> Policy:
    """A built-in name, ``/path/file.py:function`` or ``package.module:function``."""
    if spec in BUILTINS:
        return BUILTINS[spec]
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"policy {spec!r} is not a built-in ({', '.join(BUILTINS)}) or module:function")
    if where.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location("fakemodel_policy", where)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"policy file {where!r} cannot be loaded")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"policy {spec!r} names no function")
    return function


def decide(seen: View, policy: Policy) -> dict:
    """The submission body a policy produces for this conversation.

    A policy that returns only decisions gets the body around them; for an edit task (Adjust
    Memory) that body says ``edit_result``: ``modified`` when a decision changes memory, else
    ``clarification_required`` (the policy did not understand the request)."""
    state = policy_state(seen)
    produced = policy(state)
    if isinstance(produced, list):
        task = state["task"]
        body: dict = {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": produced}
        if task.get("task_kind") == "edit":
            changes = any(isinstance(d, dict) and d.get("kind") != "ignore" for d in produced)
            body["edit_result"] = "modified" if changes else "clarification_required"
        produced = body
    if not isinstance(produced, dict):
        raise ValueError("a policy must return a submission body or a list of decisions")
    return produced


class Driver:
    """Turns ``{"policy": true}`` replies into the diligent model's next answer (thread-safe)."""

    def __init__(self, settings: dict | None) -> None:
        self.batch = bool(settings and settings["batch"])
        self.reading = settings.get("reading", "bulk") if settings else "bulk"
        self.policy = load_policy(settings["spec"]) if settings else None
        self._inject = {cue: list(items) for cue, items in (settings or {}).get("inject", {}).items()}
        self._first = True
        self._lock = threading.Lock()

    def answer(self, path: str, body: object, reply: dict) -> tuple[dict, str | None]:
        """The concrete reply for a policy step, and the cue it answered."""
        if self.policy is None:
            raise ValueError("a reply asks for the policy but the script has none")
        seen = view(path, body)
        if seen.task is None:
            # Not a Memory Agent task (``cm network-test``'s probe, or any plain prompt): a short
            # plain answer, as a model would give, instead of a policy step that needs a task.
            return {"text": "OK"}, "not_a_task"
        calls = next_calls(seen, self.batch, self.reading)
        cue = "done" if seen.submitted else (calls[0][0] if calls else SUBMIT)
        with self._lock:
            cues = (["first"] if self._first else []) + [cue] + (["submit"] if cue == SUBMIT else [])
            self._first = False
            for name in cues:
                queue = self._inject.get(name)
                if queue:
                    injected = queue.pop(0)
                    if not injected.get("policy"):
                        return injected, name
                    reply = injected
                    break
        modifiers = {k: v for k, v in reply.items() if k not in ("policy", "duplicate", "tool_calls", "text")}
        if cue == "done":
            return {"text": "The decision was submitted.", **modifiers}, cue
        if not calls:
            decision = decide(seen, self.policy)
            if "reply" in decision:  # the policy answers with a reply of its own, e.g. an HTTP error
                return decision["reply"], cue
            calls = [(SUBMIT, decision)]
        names = offered_names(body)
        tool_calls = [{**names.get(name, {"name": name}), "arguments": args} for name, args in calls]
        if reply.get("duplicate"):
            tool_calls = [c for c in tool_calls for _ in range(2)]
        answer = {"tool_calls": tool_calls, **modifiers}
        if "text" in reply:
            answer["text"] = reply["text"]
        return answer, cue
