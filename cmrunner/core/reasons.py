"""Why something is stuck, in plain words, and the command that fixes it: code → (reason, remedy).

Contract:
- ``TABLE`` is the one place that explains the codes a quarantined observation, a dead or waiting
  job, an isolated session or a drain failure can carry (``tests/test_reasons.py`` checks that
  every code the code base can record has an entry). ``explain`` falls back to a generic entry for
  a code it does not know, so ``cm status`` always says something.
- Each entry says *why* (``reason``), what to change first (``fix``, may be empty) and which
  command applies (``action``): ``release`` (``cm release --code CODE``: back to the queue),
  ``retry`` (``cm retry <job id>``), ``auto`` (cm tries again by itself), ``recover``
  (``cm session-drain --recover <id>``; ``--recover-code CODE`` for a group), ``wait`` (it resumes by itself when a condition lifts,
  sooner if the user changes what ``fix`` names) or ``none`` (nothing to run: the item is final).
- ``releasable`` is the release policy: only an entry whose action is ``release``; never
  secrets or sensitive content, unauthorized scope or provenance, forgotten or unclassifiable
  sources.
- ``remedy`` renders the one-line remedy for a group in a given state, with the real ids; for a
  dead job, ``dead_fix`` says what to change first when cm stopped retrying a code it otherwise
  retries by itself (the model's own mistakes: try another model), and a decision the scanner
  refused names ``cm secrets allow <fingerprint>`` from the job's recorded rejection.
- ``provider_fix(code, diagnostic)`` is the fix that matches how a provider failed, from the
  diagnostic's ``httpStatus`` and ``reason`` (a 404: the base URL's API path; 401/403: the key; an
  unknown model: the model list; nothing answering: the server or the URL, named when the caller
  gives the configured ``remote.baseUrl``), or ``""`` when the table's fix stands; ``remedy`` uses it when given the ``hint`` (``provider_hint``: only those
  two fields) and `cm network-test` prints it.
- ``cause`` renders a job's cause in one line (issue code, where the last rejection went wrong,
  the code the attempt ended with), the one form every surface shows.
Reasons and remedies never contain user text: only codes, ids, setting names, commands and the
configured base URL (validated to hold no credentials).
Stdlib only, no imports from the Writer side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

RELEASE, RETRY, AUTO, RECOVER, WAIT, NONE = "release", "retry", "auto", "recover", "wait", "none"


class Reason(NamedTuple):
    reason: str
    fix: str
    action: str
    dead_fix: str = ""  # what to change before `cm retry` once cm stopped trying by itself


_DECISION = "the Memory Agent's decision broke a rule ({what}), so nothing was written"
_DAMAGED = "a staged commit under runtime/transactions is inconsistent ({what})"
_SESSION = "the session's host records could not be matched safely ({what}), so the session was set aside"
_ASK_AGAIN = "nothing to do: cm asks again"
# A job that died on the model's own decisions failed twice with fresh conversations (jobs.MAX_MODEL_FAILURES).
_MODEL_FIX = "the model kept making this mistake: try another model (remote.model in config.json)"


def _decision(what: str, fix: str = _ASK_AGAIN) -> Reason:
    return Reason(_DECISION.format(what=what), fix, AUTO, _MODEL_FIX)


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
    "RECOVERY_BUDGET_EXHAUSTED": Reason("the job was interrupted (its drain was killed or crashed while holding it) "
                                        "after it had failed or been interrupted five times before",
                                        "see 'last drain failure' in `cm status` and the drain log", RETRY),
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
    "MODEL_UNREACHABLE": Reason("nothing answered at the model's base URL: its server is not running (a local "
                                "model server such as Ollama or LM Studio) or remote.baseUrl is wrong",
                                "start the model server or fix remote.baseUrl (`cm network-test` checks it); cm tries "
                                "again after a backoff", AUTO,
                                "start the model server or fix remote.baseUrl (`cm network-test` checks it)"),
    "UNAVAILABLE": Reason("the provider or the network route could not be reached",
                          "check the route with `cm network-test`; cm tries again after a backoff", AUTO,
                          "check the route with `cm network-test`"),
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
                                 "nothing to do: cm tries again after a backoff", AUTO, _MODEL_FIX),
    # -- an agent CLI as the Memory Agent's runtime (remote.provider agent-cli) ------------------
    "AGENT_CLI_NOT_FOUND": Reason("the agent CLI set in remote.agent was not found or would not start",
                                  "install it or set remote.agentPath (`cm doctor` says whether it is found)", RETRY),
    "AGENT_CLI_AUTH": Reason("the agent CLI is not logged in, or its login expired",
                             "run the CLI once yourself and log in", RETRY),
    "AGENT_CLI_QUOTA": Reason("the agent CLI reported a usage limit", "nothing to do: cm tries again after a backoff",
                              AUTO, "wait for the CLI's usage limit to reset"),
    "SENSITIVE_CONTENT_REJECTED": Reason("a request or the rendered result looked like it contained a secret, so "
                                         "nothing was sent or written", "", RETRY),
    # -- the decision contract and the agent's tools -----------------------------------------
    "INVALID_DECISION": _decision("schema"),
    "UNSAFE_CHARACTER": _decision("a control or bidirectional character in a title or body",
                                  "nothing to do: cm asks again; if it keeps failing, try another model"),
    "INVALID_REQUEST_REFERENCE": _decision("request id"),
    "INVALID_EVIDENCE_REFERENCE": _decision("evidence"),
    "MISSING_EVIDENCE": _decision("evidence"),
    "INVALID_TARGET_REFERENCE": _decision("target or section"),
    "UNAUTHORIZED_SCOPE": _decision("scope"),
    "UNAUTHORIZED_WRITE": _decision("writable scopes",
                                    "add the scope to writableScopes if cm may change it; cm asks again"),
    "DUPLICATE_SECTION_OPERATION": _decision("one section changed twice"),
    "UNAUTHORIZED_FORGET_EVIDENCE": _decision("import guard"),
    "UNAUTHORIZED_IMPORT_OVERWRITE": _decision("import guard"),
    "IMPORT_INSTRUCTION_IN_PROFILE": _decision("an imported instruction to an agent written to the profile"),
    "IMPORT_KIND_WRONG_TARGET": _decision("an import written where its kind may not go"),
    "STALE_SOURCE": _decision("evidence older than a correction"),
    "INVALID_EDIT_RESULT": _decision("edit result"),
    "INCOMPLETE_INGEST_COVERAGE": _decision("submitted before reading all input"),
    "UNREAD_MEMORY_TARGET": _decision("edited a document it had not read"),
    "DECISION_ALREADY_SUBMITTED": _decision("second submission"),
    "INVALID_BLOCK_REFERENCE": _decision("read tool arguments"),
    "INVALID_INGEST_HANDLE": _decision("read tool arguments"),
    "INVALID_PAGE_OFFSET": _decision("read tool arguments"),
    "INVALID_SNAPSHOT_HANDLE": _decision("read tool arguments"),
    "NONCONTIGUOUS_READ": _decision("reads out of order"),
    "NOTES_TOO_LARGE": _decision("working notes too large"),
    "SENSITIVE_NOTES_REJECTED": _decision("working notes looked like a secret"),
    "TOOL_ARGUMENTS_INVALID": _decision("tool arguments"),
    "TOOL_REJECTED": _decision("tool call"),
    "UNKNOWN_TOOL": _decision("unknown tool"),
    "MEMORY_TOOL_REJECTED": _decision("tool call"),
    "INVALID_SECTION_TITLE": _decision("section title"),
    "INVALID_SECTION_BODY": _decision("section body"),
    # -- the memory files -----------------------------------------------------------------------
    # -- memory sync (recorded in runtime/sync/state.json, shown by `cm status` and `cm sync status`) --
    "GIT_NOT_FOUND": Reason("memory sync needs git and none is on PATH", "install git", WAIT),
    "GIT_FAILED": Reason("a git command of the memory sync failed; the memory files are untouched",
                         "run `cm sync repair`, then `cm sync`", WAIT),
    "SYNC_TIMEOUT": Reason("a sync ran past its time limit (the remote did not answer in time, or the memory "
                           "stayed busy); the memory files are untouched and a local commit stays",
                           "nothing to do: cm retries at the next commit, or at the first drain 5 minutes or more "
                           "after this failure (check the network or the remote, or run `cm sync` now)", AUTO),
    "DRAIN_BUSY": Reason("a drain kept processing memory past the sync's wait, so the pulled changes were not "
                         "published yet (nothing was lost)", "nothing to do: cm retries at the next commit, or at "
                         "the first drain 5 minutes or more after this failure (or run `cm sync` when `cm status` "
                         "shows the drain idle)", AUTO),
    "SYNC_BUSY": Reason("another sync of this memory was running", "nothing to do: it syncs the same memory", AUTO),
    "SYNC_NOT_SET_UP": Reason("memory sync is not set up", "run `cm sync init <remote>`", NONE),
    "SYNC_REPO_CORRUPT": Reason("the sync repository under runtime/sync is damaged; the memory files are untouched",
                                "run `cm sync repair`: it rebuilds it from the files and the remote", WAIT),
    "SYNC_MERGE_IN_PROGRESS": Reason("a git merge or rebase was started by hand in the sync repository, so cm "
                                     "stopped rather than guess", "run `cm sync repair`", WAIT),
    "SYNC_CONFLICT_MARKERS": Reason("a memory file holds git conflict markers written by hand",
                                    "edit the markers out of that file, then run `cm sync`", WAIT),
    "SYNC_REMOTE_UNREACHABLE": Reason("the remote could not be reached; the memory is committed locally",
                                      "nothing to do: cm retries at the next commit, or at the first drain 5 "
                                      "minutes or more after this failure (check the network or the remote, or "
                                      "run `cm sync` now)", AUTO),
    "SYNC_REMOTE_REJECTED": Reason("the remote refused cm (access, or a protected branch); the memory is committed "
                                   "locally", "check your access to the remote, then run `cm sync`", WAIT),
    "SYNC_REMOTE_BUSY": Reason("the remote kept moving while cm merged", "nothing to do: cm syncs again", AUTO),
    "SYNC_DOCUMENT_UNREADABLE": Reason("a copy of a memory file (here or on the remote) does not read as sections, so "
                                       "it was not merged", "run `cm fix <document>` where it was edited, then "
                                       "`cm sync`", WAIT),
    "SYNC_SECTION_KEPT_LOCAL": Reason("a section the secret net withholds stays on this machine and is not pushed; "
                                      "the rest of its file syncs", "if it is no secret, `cm secrets allow "
                                      "<fingerprint>` (`cm secrets list` shows it)", NONE),
    "STALE_REVISION": Reason("a memory file changed while the agent worked (a hand edit or another job)",
                             "nothing to do: cm tries again on the new version", AUTO),
    "RECOVERY_CONFLICT": Reason("an interrupted commit found a memory file changed by someone else, so cm stopped "
                                "rather than overwrite it", "compare memory/ with runtime/transactions", RETRY),
    "DOCUMENT_TOO_LARGE": Reason("a memory file is larger than its hard size budget", "shorten it by hand", RETRY),
    "DUPLICATE_SECTION_TITLE": Reason("a memory file has two sections with the same title", "rename one by hand",
                                      RETRY),
    "INVALID_DOCUMENT": Reason("a memory file has something cm cannot read as sections (its line is named), so "
                               "the decisions that would write it wait",
                               "run `cm fix <document>`: it shows a normalised version and writes it when you "
                               "confirm (or fix the line by hand)", RETRY),
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
    "UNSUPPORTED_REGISTRY_VERSION": Reason("runtime/projects.json was written by a newer cm", "upgrade cm", RETRY),
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
    "INTERNAL_ERROR": Reason("a hook or capture failed unexpectedly (a cm bug; `cm status` shows where); that event "
                             "was not admitted and the host went on", "report it and upgrade cm", NONE),
    # -- a session or job that provoked a failure nobody expected (cmrunner.core.poison) --------
    "UNEXPECTED_FAILURE": Reason("cm failed unexpectedly on it (a cm bug; `cm status` shows where), so it was set "
                                 "aside and the rest went on", "report it and upgrade cm", RECOVER),
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


def where(rejection: Mapping[str, object] | None) -> str:
    """Where a recorded rejection went wrong, in a few words: ``rule secret.high_entropy on
    preferences/Note`` or ``at $.request_id: does not name this job``; empty when it names nothing."""
    if not rejection:
        return ""
    rule = rejection.get("rule")
    place = "/".join(str(rejection[k]) for k in ("target", "section") if rejection.get(k))
    if place:
        return f"rule {rule} on {place}" if rule else f"on {place}"
    path = rejection.get("path")
    if path:
        return f"at {path}: {rule}" if rule else f"at {path}"
    return f"rule {rule}" if rule else ""


def cause(code: str | None, failure: str | None = None, rejection: Mapping[str, object] | None = None) -> str:
    """A job's cause in one line, the same in ``cm status``, its JSON, the drain log, ``cm flush`` and
    the terminal UI: the issue code, where the model's rejected call went wrong when the rejection
    is the cause, and the code the attempt ended with when that differs, e.g.
    ``SENSITIVE_CONTENT_REJECTED (rule secret.high_entropy on preferences/Note), then MISSING_SUBMISSION``."""
    text = code or "UNKNOWN"
    if rejection and rejection.get("code") == code:
        detail = where(rejection)
        text += f" ({detail})" if detail else ""
        if failure and failure != code:
            text += f", then {failure}"
    return text


def _secret_fix(rejection: Mapping[str, object] | None) -> str:
    """For a decision the scanner refused: how to say a false secret is not one (its fingerprint)."""
    fingerprint = (rejection or {}).get("fingerprint")
    rule = str((rejection or {}).get("rule") or "")
    if not fingerprint or not rule.startswith("secret."):
        return ""
    return f"if the value is not a secret, run `cm secrets allow {fingerprint}`"


_MODEL_SETUP = "(the model setup of `cm config` checks it)"
_PROVIDER_CODES = ("INVALID_RESPONSE", "AUTHENTICATION", "UNAVAILABLE", "MODEL_UNREACHABLE", "TIMEOUT")
_UNREACHED = ("connection_refused", "dns_error", "connection_timeout")


def provider_hint(diagnostic: Mapping[str, object] | None) -> dict | None:
    """The part of a failure's diagnostic that decides ``provider_fix``: ``httpStatus`` and ``reason``."""
    if not diagnostic:
        return None
    hint = {k: diagnostic[k] for k in ("httpStatus", "reason") if k in diagnostic}
    return hint or None


def provider_fix(code: str | None, diagnostic: Mapping[str, object] | None, url: str | None = None) -> str:
    """The fix that matches how the provider failed (see module contract), or ``""``; ``url`` is the
    configured ``remote.baseUrl``, named when nothing answered there."""
    if code not in _PROVIDER_CODES or not diagnostic:
        return ""
    status, reason = diagnostic.get("httpStatus"), diagnostic.get("reason")
    if reason == "model_not_found":
        return f"the provider does not know remote.model: pick a model from its model list {_MODEL_SETUP}"
    if status == 404:
        return ("the provider answered HTTP 404: remote.baseUrl is probably missing its API path (for example /v1 "
                f"at its end); fix the base URL {_MODEL_SETUP}")
    if status in (401, 403) or code == "AUTHENTICATION":
        return f"the provider refused the API key (HTTP {status}): put the right key in the private .env {_MODEL_SETUP}"
    if reason in _UNREACHED:
        return f"nothing answered at {url or 'remote.baseUrl'}: start the model server or fix the base URL {_MODEL_SETUP}"
    return ""


def remedy(code: str | None, state: str, ids: list[str] | None = None,
           rejection: Mapping[str, object] | None = None, hint: Mapping[str, object] | None = None,
           url: str | None = None) -> str:
    """One line: what to do about a group in ``state`` (``quarantined``, ``dead``, ``retry`` or
    ``isolated``). ``ids`` are the job ids (12 characters) to retry, or the recovery ids;
    ``rejection`` is the jobs' recorded last rejection, when ``code`` is its code; ``hint`` is
    the provider's answer (``provider_hint``) when the failure came from it; ``url`` the configured
    ``remote.baseUrl`` (``provider_fix``)."""
    entry = explain(code)
    ids = ids or []
    fix = provider_fix(code, hint, url) or entry.fix
    if code == "SENSITIVE_CONTENT_REJECTED" and rejection and rejection.get("code") == code:
        fix = _secret_fix(rejection) or fix
    if code == "INVALID_DOCUMENT" and rejection and rejection.get("code") == code and rejection.get("target"):
        document = rejection["target"]
        fix = (f"run `cm fix {document}`: it shows a normalised version, writes it when you confirm and retries "
               f"the jobs that waited for {document}")
        if state == "dead":
            return fix
    if state == "isolated" and len(ids) > 1:
        command = f"`cm session-drain --recover-code {code}` (all {len(ids)})"
    elif state == "isolated":
        command = _ids("cm session-drain --recover", ids) if ids else "`cm session-drain --recover <id>`"
    elif state == "quarantined" and entry.action == RELEASE:
        command = f"`cm release --code {code}`"
    elif state == "quarantined" and ids and entry.action == RETRY:
        command = _ids("cm retry", ids)
    elif state == "dead":
        # A dead job never comes back by itself, whatever its code: the remedy is always a retry,
        # after what must change first (``dead_fix`` for a code cm would otherwise retry by itself).
        if fix == entry.fix:
            fix = entry.dead_fix or ("" if entry.action in (AUTO, NONE) else fix)
        command = _ids("cm retry", ids) if ids else "`cm retry <job id>`"
    elif entry.action == WAIT:
        return fix
    elif state == "retry":
        return "nothing to do: cm tries again after its backoff" if entry.action == AUTO or not fix \
            else f"{fix}; cm tries again after its backoff"
    else:
        return fix or "nothing to do"
    return f"{fix}, then {command}" if fix else command
