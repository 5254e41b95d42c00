"""Why something is stuck, in plain words, and the command that fixes it: code → (reason, remedy).

Contract:
- ``TABLE`` is the one place that explains the codes a quarantined observation, a dead or waiting
  job, an isolated session or a drain failure can carry (``tests/test_reasons.py`` checks that
  every code the code base can record has an entry). ``explain`` falls back to a generic entry for
  a code it does not know, so ``cm status`` always says something.
- Each entry says *why* (``reason``), what to change first (``fix``, may be empty) and which
  command applies (``action``): ``release`` (``cm release --code CODE``: back to the queue),
  ``retry`` (``cm retry <job id>``), ``auto`` (cm tries again by itself), ``recover``
  (``cm session-drain --recover <id>``), ``wait`` (it resumes by itself when a condition lifts,
  sooner if the user changes what ``fix`` names) or ``none`` (nothing to run: the item is final).
- ``releasable`` is the release policy: only an entry whose action is ``release``; never
  secrets or sensitive content, unauthorized scope or provenance, forgotten or unclassifiable
  sources.
- ``remedy`` renders the one-line remedy for a group in a given state, with the real ids.
Reasons and remedies never contain user text: only codes, ids, setting names and commands.
Stdlib only, no imports from the Writer side.
"""

from __future__ import annotations

from typing import NamedTuple

RELEASE, RETRY, AUTO, RECOVER, WAIT, NONE = "release", "retry", "auto", "recover", "wait", "none"


class Reason(NamedTuple):
    reason: str
    fix: str
    action: str


_DECISION = "the Memory Agent's decision broke a rule ({what}), so nothing was written"
_DAMAGED = "a staged commit under runtime/transactions is inconsistent ({what})"
_SESSION = "the session's host records could not be matched safely ({what}), so the session was set aside"

TABLE: dict[str, Reason] = {
    # -- quarantined before any network call (observation or whole job) -----------------------
    "UNSUPPORTED_SOURCE": Reason("it came from a source cm cannot classify, so it is never sent to the model",
                                 "nothing to do: it stays on this machine", NONE),
    "FORGOTTEN_SOURCE": Reason("you asked the memory to forget exactly this text before, so it is not remembered again",
                               "nothing to do; say it differently or use Adjust Memory if it should be kept now", NONE),
    "INTERRUPTED_TURN": Reason("the turn was interrupted before the agent answered, so it was not taken as evidence",
                               "if it should still be remembered", RELEASE),
    "COMMAND_EXPANSION": Reason("the prompt was a command's expansion (Gemini CLI custom command), not words the user "
                                "typed, so it was not taken as evidence", "nothing to do; say it in your own words", NONE),
    "UNCONFIRMED_PROMPT": Reason("Gemini CLI's chat record did not show this prompt as typed by the user, so it was "
                                 "not taken as evidence", "if it should still be remembered", RELEASE),
    "INCOMPLETE_TURN": Reason("the session ended before this turn finished, so it was not taken as evidence",
                              "if it should still be remembered", RELEASE),
    "MIXED_SESSION_TURN": Reason("one turn mixed messages of different scopes or sources, so cm cannot tell where "
                                 "it belongs", "nothing to do; repeat it in the session or project it belongs to", NONE),
    "SENSITIVE_INPUT": Reason("the text looks like a secret (key, token, password or private key), so it stays on "
                              "this machine and is never sent", "nothing to do; it cannot be released", NONE),
    "OVERSIZED_COMPLETE_SOURCE": Reason("one message is larger than the disclosure byte cap, so it was not sent",
                                        "raise disclosure.maxExcerptBytes / maxCandidateBytes / maxTotalBytes in "
                                        "config.json", RELEASE),
    "SOURCE_TOO_LARGE": Reason("one message or import part is too large for any request the Memory Agent may send "
                               "(remote.maxRequestBytes), so it was not sent",
                               "raise remote.maxRequestBytes in config.json if your model accepts larger requests; a "
                               "Markdown file imported again with `cm import` is split into parts that fit", RELEASE),
    "UNAUTHORIZED_SOURCE": Reason("its scope is not in disclosure.allowedScopes, so nothing was sent",
                                  "add the scope to disclosure.allowedScopes if it may be disclosed", RETRY),
    "UNAUTHORIZED_PROVENANCE": Reason("its kind of source is not in disclosure.allowedProvenance, so nothing was sent",
                                      "add it to disclosure.allowedProvenance if it may be disclosed", RETRY),
    "UNREGISTERED_PROJECT": Reason("its project is no longer registered, so nothing was sent",
                                   "register the project again (`cm project register`)", RETRY),
    "MIXED_BATCH": Reason("the job held observations of different scopes or kinds of source, so nothing was sent "
                          "(a job holds one of each)", "release them: each scope and kind then gets a job of its own",
                          RELEASE),
    "EMPTY_BATCH": Reason("nothing in the job could be sent: every part was set aside or its text is gone",
                          "nothing to do", NONE),
    # -- the drain itself ------------------------------------------------------------------------
    "DRAIN_CRASHED": Reason("the drain stopped on an unexpected internal error (a cm bug) while holding the job",
                            "see 'last drain failure' in `cm status` and the drain log; cm tries again after a "
                            "backoff", AUTO),
    "DRAIN_INTERRUPTED": Reason("the drain or `cm flush` was stopped (for example Ctrl+C) while holding the job",
                                "nothing to do: cm tries again after a backoff", AUTO),
    "RECOVERY_BUDGET_EXHAUSTED": Reason("the job failed or was interrupted six times (the first attempt plus five "
                                        "recoveries)", "find the cause in the drain log", RETRY),
    # -- the model provider and the network --------------------------------------------------
    "AUTHENTICATION": Reason("the provider rejected the API key",
                             "put the right key in the private .env (the model setup of `cm config`)", RETRY),
    "PROXY_AUTHENTICATION": Reason("the proxy demanded credentials it did not get",
                                   "fix the proxy credentials in the private .env", RETRY),
    "CONFIGURATION": Reason("the model's network settings are invalid",
                            "fix remote.proxy / caFileEnv or the private .env (`cm network-test` checks them)", RETRY),
    "RATE_LIMITED": Reason("the provider is rate limiting", "nothing to do: cm tries again after a backoff", AUTO),
    "SPEND_CAP_REACHED": Reason("a spend cap (config.json spend: tokens per day or month, requests per hour) was "
                                "reached, so the Memory Agent waits; nothing is lost",
                                "wait for the cap's window to end, or raise it with `cm usage caps`", WAIT),
    "UNAVAILABLE": Reason("the provider or the network route could not be reached",
                          "check the route with `cm network-test`; cm tries again after a backoff", AUTO),
    "TIMEOUT": Reason("the model request timed out", "nothing to do: cm tries again after a backoff", AUTO),
    "INVALID_RESPONSE": Reason("the provider's answer could not be used (for example an unknown model or a rejected "
                               "request)", "check remote.model and run `cm network-test`", RETRY),
    "REQUEST_TOO_LARGE": Reason("the Memory Agent's conversation grew past remote.maxRequestBytes, so the next "
                                "request was not sent", "raise remote.maxRequestBytes in config.json if your model "
                                "accepts larger requests", RETRY),
    "ATTEMPT_BUDGET_EXHAUSTED": Reason("one attempt sent its byte budget (16 full-size requests) without a decision, "
                                       "so it stopped", "check the model with `cm network-test`", RETRY),
    "MODEL_REFUSAL": Reason("the model refused the maintenance task", "", RETRY),
    "AGENT_TURN_LIMIT": Reason("the Memory Agent used all remote.maxAgentTurns without submitting a decision",
                               "raise remote.maxAgentTurns in config.json", RETRY),
    "CONTEXT_LIMIT": Reason("the model's context window ran out",
                            "use a model with a larger context or lower the disclosure byte caps", RETRY),
    "MISSING_SUBMISSION": Reason("the model ended without submitting a decision",
                                 "nothing to do: cm tries again after a backoff", AUTO),
    "SENSITIVE_CONTENT_REJECTED": Reason("a request or the rendered result looked like it contained a secret, so "
                                         "nothing was sent or written", "", RETRY),
    # -- the decision contract and the agent's tools -----------------------------------------
    "INVALID_DECISION": Reason(_DECISION.format(what="schema"), "nothing to do: cm asks again", AUTO),
    "UNSAFE_CHARACTER": Reason(_DECISION.format(what="a control or bidirectional character in a title or body"),
                               "nothing to do: cm asks again; if it keeps failing, try another model", AUTO),
    "INVALID_REQUEST_REFERENCE": Reason(_DECISION.format(what="request id"), "nothing to do: cm asks again", AUTO),
    "INVALID_EVIDENCE_REFERENCE": Reason(_DECISION.format(what="evidence"), "nothing to do: cm asks again", AUTO),
    "MISSING_EVIDENCE": Reason(_DECISION.format(what="evidence"), "nothing to do: cm asks again", AUTO),
    "INVALID_TARGET_REFERENCE": Reason(_DECISION.format(what="target or section"), "nothing to do: cm asks again",
                                       AUTO),
    "UNAUTHORIZED_SCOPE": Reason(_DECISION.format(what="scope"), "nothing to do: cm asks again", AUTO),
    "UNAUTHORIZED_WRITE": Reason(_DECISION.format(what="writable scopes"),
                                 "add the scope to writableScopes if cm may change it; cm asks again", AUTO),
    "DUPLICATE_SECTION_OPERATION": Reason(_DECISION.format(what="one section changed twice"),
                                          "nothing to do: cm asks again", AUTO),
    "UNAUTHORIZED_FORGET_EVIDENCE": Reason(_DECISION.format(what="import guard"), "nothing to do: cm asks again", AUTO),
    "UNAUTHORIZED_IMPORT_OVERWRITE": Reason(_DECISION.format(what="import guard"), "nothing to do: cm asks again",
                                            AUTO),
    "STALE_SOURCE": Reason(_DECISION.format(what="evidence older than a correction"), "nothing to do: cm asks again",
                           AUTO),
    "INVALID_EDIT_RESULT": Reason(_DECISION.format(what="edit result"), "nothing to do: cm asks again", AUTO),
    "INCOMPLETE_INGEST_COVERAGE": Reason(_DECISION.format(what="submitted before reading all input"),
                                         "nothing to do: cm asks again", AUTO),
    "UNREAD_MEMORY_TARGET": Reason(_DECISION.format(what="edited a document it had not read"),
                                   "nothing to do: cm asks again", AUTO),
    "DECISION_ALREADY_SUBMITTED": Reason(_DECISION.format(what="second submission"), "nothing to do: cm asks again",
                                         AUTO),
    "INVALID_BLOCK_REFERENCE": Reason(_DECISION.format(what="read tool arguments"), "nothing to do: cm asks again",
                                      AUTO),
    "INVALID_INGEST_HANDLE": Reason(_DECISION.format(what="read tool arguments"), "nothing to do: cm asks again", AUTO),
    "INVALID_PAGE_OFFSET": Reason(_DECISION.format(what="read tool arguments"), "nothing to do: cm asks again", AUTO),
    "INVALID_SNAPSHOT_HANDLE": Reason(_DECISION.format(what="read tool arguments"), "nothing to do: cm asks again",
                                      AUTO),
    "NONCONTIGUOUS_READ": Reason(_DECISION.format(what="reads out of order"), "nothing to do: cm asks again", AUTO),
    "NOTES_TOO_LARGE": Reason(_DECISION.format(what="working notes too large"), "nothing to do: cm asks again", AUTO),
    "SENSITIVE_NOTES_REJECTED": Reason(_DECISION.format(what="working notes looked like a secret"),
                                       "nothing to do: cm asks again", AUTO),
    "TOOL_ARGUMENTS_INVALID": Reason(_DECISION.format(what="tool arguments"), "nothing to do: cm asks again", AUTO),
    "TOOL_REJECTED": Reason(_DECISION.format(what="tool call"), "nothing to do: cm asks again", AUTO),
    "UNKNOWN_TOOL": Reason(_DECISION.format(what="unknown tool"), "nothing to do: cm asks again", AUTO),
    "MEMORY_TOOL_REJECTED": Reason(_DECISION.format(what="tool call"), "nothing to do: cm asks again", AUTO),
    "INVALID_SECTION_TITLE": Reason(_DECISION.format(what="section title"), "nothing to do: cm asks again", AUTO),
    "INVALID_SECTION_BODY": Reason(_DECISION.format(what="section body"), "nothing to do: cm asks again", AUTO),
    # -- the memory files -----------------------------------------------------------------------
    "STALE_REVISION": Reason("a memory file changed while the agent worked (a hand edit or another job)",
                             "nothing to do: cm tries again on the new version", AUTO),
    "RECOVERY_CONFLICT": Reason("an interrupted commit found a memory file changed by someone else, so cm stopped "
                                "rather than overwrite it", "compare memory/ with runtime/transactions", RETRY),
    "DOCUMENT_TOO_LARGE": Reason("a memory file is larger than its hard size budget", "shorten it by hand", RETRY),
    "DUPLICATE_SECTION_TITLE": Reason("a memory file has two sections with the same title", "rename one by hand",
                                      RETRY),
    "INVALID_DOCUMENT": Reason("a memory file is not in cm's section format", "fix it by hand", RETRY),
    "INVALID_BUDGET": Reason("a document size budget in the configuration is invalid", "fix it in config.json", RETRY),
    "REPOSITORY_LOCK_TIMEOUT": Reason("another process held the memory folder's lock too long",
                                      "nothing to do: cm tries again after a backoff", AUTO),
    "INVALID_TRANSACTION": Reason(_DAMAGED.format(what="journal"), "compare memory/ with runtime/transactions", RETRY),
    "TRANSACTION_ORDER": Reason(_DAMAGED.format(what="order"), "compare memory/ with runtime/transactions", RETRY),
    "TRANSACTION_PENDING": Reason(_DAMAGED.format(what="an earlier commit is unfinished"),
                                  "nothing to do: cm finishes it first", AUTO),
    "RECEIPT_EXISTS": Reason(_DAMAGED.format(what="receipt already exists"), "compare runtime/receipts", RETRY),
    "UNSAFE_RECEIPT": Reason(_DAMAGED.format(what="receipt"), "compare runtime/receipts", RETRY),
    # -- storage and configuration ----------------------------------------------------------
    "DATA_ROOT_UNWRITABLE": Reason("cm could not write in the data root", "fix its permissions or free disk space",
                                   RETRY),
    "UNSAFE_PATH": Reason("a path under the data root is a symbolic link or not a regular file or directory",
                          "remove or fix it", RETRY),
    "FILE_TOO_LARGE": Reason("a file cm reads is larger than its limit", "shorten or remove it", RETRY),
    "PATH_NOT_ABSOLUTE": Reason("a configured path is not absolute", "fix it in config.json", RETRY),
    "STORE_BUSY": Reason("the runtime database stayed locked by another process",
                         "nothing to do: cm tries again", AUTO),
    "STORE_UNAVAILABLE": Reason("runtime.sqlite could not be opened", "check the data root's permissions and disk",
                                RETRY),
    "STORE_DAMAGED": Reason("runtime.sqlite is not a readable SQLite database",
                            "move it aside (cm starts a new queue; memory files are kept) or restore it from "
                            "runtime/upgrade-backups", NONE),
    "STORE_WRITE_FAILED": Reason("a write to runtime.sqlite failed", "check free disk space and permissions", RETRY),
    "MIGRATION_INVALID": Reason("the runtime database could not be upgraded (a cm bug)", "report it", RETRY),
    "UNSUPPORTED_RUNTIME_VERSION": Reason("runtime.sqlite was written by a newer cm", "upgrade cm", RETRY),
    "CONFIG_INVALID": Reason("config.json is invalid", "fix it (`cm status` shows the error)", RETRY),
    "UNSUPPORTED_CONFIG_VERSION": Reason("config.json is from another cm version", "upgrade cm or rewrite it with "
                                         "`cm config init`", RETRY),
    "ENV_INVALID": Reason("the private .env is invalid", "fix it or rewrite it with `cm config init`", RETRY),
    "PROJECT_REGISTRY_INVALID": Reason("runtime/projects.json is invalid", "fix it or register the projects again",
                                       RETRY),
    "INVALID_OBSERVATION": Reason("a captured message was malformed", "", RECOVER),
    # -- isolated host sessions ---------------------------------------------------------------
    "CODEX_UNKNOWN_TRANSCRIPT": Reason(_SESSION.format(what="an unknown transcript record"), "", RECOVER),
    "CODEX_UNKNOWN_COMPLETION": Reason(_SESSION.format(what="an unknown turn completion"), "", RECOVER),
    "CODEX_UNSUPPORTED_VERSION": Reason("the transcript was written by a Codex version cm does not support",
                                        "use a supported Codex version", RECOVER),
    "CODEX_UNSETTLED_TURN": Reason(_SESSION.format(what="a turn never settled"), "", RECOVER),
    "CODEX_CURSOR_CONFLICT": Reason(_SESSION.format(what="the transcript cursor moved"), "", RECOVER),
    "CODEX_UNCONFIRMED_DELIVERY": Reason(_SESSION.format(what="a prompt without a matching delivered message"), "",
                                         RECOVER),
    "CODEX_TRANSCRIPT_REPLACED": Reason(_SESSION.format(what="the transcript file was replaced"), "", RECOVER),
    "CODEX_UNSAFE_TRANSCRIPT": Reason(_SESSION.format(what="the transcript is a link or not a regular file"), "",
                                      RECOVER),
    "CODEX_TRANSCRIPT_MISSING": Reason(_SESSION.format(what="the transcript file is gone"), "", RECOVER),
    "CODEX_PARTIAL_TRANSCRIPT": Reason(_SESSION.format(what="the transcript had no complete first line"), "",
                                       RECOVER),
    "SESSION_MESSAGE_CONFLICT": Reason(_SESSION.format(what="one message id with two contents"), "", RECOVER),
    "SESSION_TURN_CLOSED": Reason(_SESSION.format(what="a message for a closed turn"), "", RECOVER),
    "SESSION_SETTLE_CONFLICT": Reason(_SESSION.format(what="a turn settled twice differently"), "", RECOVER),
    "SESSION_CAPACITY_EXCEEDED": Reason("the session holds more unprocessed text than its capacity",
                                        "process the queue first (`cm flush`)", RECOVER),
    "INVALID_SESSION_MESSAGE": Reason(_SESSION.format(what="a malformed session message"), "", RECOVER),
}

UNKNOWN = Reason("an unexpected failure", "find the cause in the drain log", RETRY)


def explain(code: str | None) -> Reason:
    return TABLE.get(code or "", UNKNOWN)


def releasable(code: str | None) -> bool:
    """The release policy: may a quarantined observation with ``code`` go back to the queue?"""
    return code in TABLE and TABLE[code].action == RELEASE  # type: ignore[index]


def _ids(command: str, ids: list[str]) -> str:
    shown = ", ".join(f"`{command} {i}`" for i in ids[:3])
    return shown + (f" (and {len(ids) - 3} more)" if len(ids) > 3 else "")


def remedy(code: str | None, state: str, ids: list[str] | None = None) -> str:
    """One line: what to do about a group in ``state`` (``quarantined``, ``dead``, ``retry`` or
    ``isolated``). ``ids`` are the job ids (12 characters) to retry, or the recovery ids."""
    entry = explain(code)
    ids = ids or []
    fix = entry.fix
    if state == "isolated":
        command = _ids("cm session-drain --recover", ids) if ids else "`cm session-drain --recover <id>`"
    elif state == "quarantined" and entry.action == RELEASE:
        command = f"`cm release --code {code}`"
    elif state == "quarantined" and ids and entry.action == RETRY:
        command = _ids("cm retry", ids)
    elif state == "dead":
        # A dead job never comes back by itself, whatever its code: the remedy is always a retry.
        fix = "" if entry.action in (AUTO, NONE) else fix
        command = _ids("cm retry", ids) if ids else "`cm retry <job id>`"
    elif entry.action == WAIT:
        return fix
    elif state == "retry":
        return "nothing to do: cm tries again after its backoff" if entry.action == AUTO or not fix \
            else f"{fix}; cm tries again after its backoff"
    else:
        return fix or "nothing to do"
    return f"{fix}, then {command}" if fix else command
