"""What ``cm status`` reports, gathered without creating or repairing anything.

Contract: resolves the configuration and storage paths, opens ``runtime.sqlite`` read-only only
if it exists, and never writes. Counts are of durable rows: inbox rows, observations and jobs by
state, isolated sessions; the drain is "alive" only if the lease holder's identity still matches a
running process. Secrets are reported as present/absent, never shown.

History and the trash are summarized through their owner (``history.summary``): the recorded
versions, the sections in the trash and when the oldest of them expires; ``None`` for a store
that predates history.

Everything stuck explains itself (``problems``): quarantined observations grouped by code and dead
jobs grouped by cause (issue, the code the last attempt ended with and the last rejection the model
received: ``reasons.cause``), each group with its reason and remedy from ``cmrunner.core.reasons``; isolated sessions grouped by code with one remedy per group;
the unfinished jobs with their 12-character ids, state and next attempt time; and the last
failure of a drain or flush (``cmrunner.core.drainfailures``) with the drain log's path. The
Processing Status screen shows the same ``problems``. ``spend`` is today's and this month's use
of the Memory Agent against its caps, and the reached cap that holds work back
(``cmrunner.views.usage``). ``device`` is this machine's name and where it came from
(``cmrunner.core.device``); ``projects`` counts the registered projects and names those known here
(a memory file, e.g. synced from another machine) but not registered (``cmrunner.core.projects``).
"""

from __future__ import annotations

import datetime
import os
import sqlite3
import time

from cmrunner.capture import codex_inbox, failures, hook_inbox, hook_rejections, observations, pi_inbox
from cmrunner.core import (
    config as config_mod,
    device,
    drainfailures,
    drainlease,
    envfile,
    fsutil,
    history,
    jobstore,
    migrations,
    projects,
    reasons,
    spend,
    store,
    syncstate,
)
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths, config_path, env_path
from cmrunner.views import usage

SHORT_ID = 12
JOB_LIST_LIMIT = 20
# The schema version that added the Claude Code / Gemini CLI hook tables (migrations.m008_agent_hooks).
HOOK_TABLES_VERSION = 8


def problems(conn: sqlite3.Connection, model_url: str | None = None) -> dict:
    """Quarantined observations, dead jobs and isolated sessions grouped by code, with reason and
    remedy; ``model_url`` is the configured ``remote.baseUrl``, named where nothing answered there."""
    from cmrunner.writer_proc import jobs

    quarantined = []
    for issue, count, ids, job_ids in observations.quarantined_by_issue(conn):
        entry = reasons.explain(issue)
        short = [j[:SHORT_ID] for j in job_ids]
        quarantined.append({"code": issue, "count": count, "reason": entry.reason,
                            "remedy": reasons.remedy(issue, "quarantined", short),
                            "releasable": reasons.releasable(issue), "observationIds": ids, "jobIds": short})
    dead = []
    for group in jobs.dead_by_issue(conn):
        entry = reasons.explain(group.issue)
        short = [j[:SHORT_ID] for j in group.ids]
        dead.append({"code": group.issue, "cause": reasons.cause(group.issue, group.failure, group.rejection),
                     "failure": group.failure, "rejection": group.rejection, "count": len(group.ids),
                     "observations": group.held, "reason": entry.reason,
                     "remedy": reasons.remedy(group.issue, "dead", short, group.rejection, group.hint, model_url),
                     "jobIds": short})
    return {"quarantined": quarantined, "dead": dead, "isolated": isolated_groups(failures.listed(conn))}


def job_list(conn: sqlite3.Connection) -> dict:
    """The unfinished jobs (short ids), at most ``JOB_LIST_LIMIT``, and their total."""
    from cmrunner.writer_proc import jobs

    listed, total = jobs.unfinished(conn, JOB_LIST_LIMIT)
    for job in listed:
        job["id"] = job["id"][:SHORT_ID]
        job["reason"] = reasons.explain(job["issue"]).reason if job["issue"] else None
        job["cause"] = reasons.cause(job["issue"], job["failure"], job["rejection"]) if job["issue"] else None
    return {"jobs": listed, "total": total}


CANCELLATIONS_SCHEMA = migrations.MIGRATIONS.index(migrations.m009_cancellations) + 1


def gather(home: str) -> dict:
    report: dict = {
        "home": home,
        "config": {"path": config_path(home), "exists": os.path.isfile(config_path(home))},
        "env": {"path": env_path(home), "exists": os.path.isfile(env_path(home))},
    }
    try:
        cfg = config_mod.load(home)
    except CmError as exc:
        report["config"]["error"] = {"code": exc.code, "message": exc.message}
        return report
    remote = cfg.remote
    report["config"]["schemaVersion"] = cfg.schema_version
    report["device"] = {"name": device.name(cfg), "source": device.source(cfg)}
    report["model"] = None
    if config_mod.is_agent_cli(remote):
        assert remote is not None
        report["model"] = {"runtime": "agent-cli", "agent": remote["agent"], "agentPath": remote.get("agentPath"),
                           "model": remote.get("model"), "label": config_mod.runtime_label(remote)}
    elif remote is not None:
        try:
            key_present = envfile.get_secret(home, remote["apiKeyEnv"]) is not None
        except CmError:
            key_present = False
        report["model"] = {
            "baseUrl": remote["baseUrl"], "model": remote["model"], "api": remote.get("api", "responses"),
            "apiKeyEnv": remote["apiKeyEnv"], "apiKeyConfigured": key_present,
            "proxy": remote.get("proxy", {}).get("mode", "legacy"),
        }
    paths = DataPaths(cfg.data_root)
    report["paths"] = {
        "dataRoot": paths.root, "memory": paths.memory, "database": paths.db,
        "runtime": paths.runtime, "projects": paths.registry, "log": paths.drain_log,
    }
    code, detail = fsutil.data_root_problem(paths.root)
    report["dataRootProblem"] = None if code is None else {"code": code, "message": detail}
    report["sync"] = sync_report(paths)
    try:  # read-only: an old registry format is read as it is, upgraded only by `cm project` commands
        registered = projects.load(paths)
        report["projects"] = {"registered": len({p.id for p in registered}),
                              "knownNotRegistered": projects.known_unregistered(paths, registered)}
    except CmError as exc:
        report["projects"] = {"error": {"code": exc.code, "message": exc.message}}
    try:  # sections the read path withholds because they look like secrets (never a value)
        from cmrunner.views import secretreport

        report["secrets"] = secretreport.summary(home)
    except CmError as exc:
        report["secrets"] = {"error": {"code": exc.code, "message": exc.message}}
    report["store"] = {"exists": os.path.isfile(paths.db), "schemaVersion": None, "codeSchemaVersion": migrations.LATEST}
    report["inbox"] = {"codex": 0, "pi": 0, "candidates": 0}
    report["observations"] = {}
    report["jobs"] = {}
    report["isolatedSessions"] = []
    report["hookRejections"] = []
    report["problems"] = {"quarantined": [], "dead": [], "isolated": []}
    report["jobList"] = {"jobs": [], "total": 0}
    report["lastDrainFailure"] = None
    report["history"] = None
    report["spend"] = usage.read(None, cfg, brief=True)
    report["drain"] = {"alive": False}
    conn = store.open_existing(paths)
    if conn is None:
        return report
    try:
        version = migrations.check_readable(conn)
        report["store"]["schemaVersion"] = version
        if version < 1:
            return report
        codex_rows, candidates = codex_inbox.waiting(conn)
        report["inbox"] = {"codex": codex_rows, "pi": pi_inbox.waiting(conn), "candidates": candidates}
        if version >= HOOK_TABLES_VERSION:
            report["inbox"]["hooks"] = hook_inbox.waiting(conn)
            report["hookRejections"] = [
                {"host": host, "code": code, "message": message, "count": count, "lastAt": last_at}
                for host, code, message, count, last_at in hook_rejections.listed(conn)
            ]
        report["observations"] = observations.count_by_state(conn)
        report["jobs"] = jobstore.count_by_state(conn)
        if version >= CANCELLATIONS_SCHEMA:
            cancels, cancelled = observations.cancellations(conn)
            report["cancelled"] = {"cancels": cancels, "observations": cancelled}
        report["isolatedSessions"] = [
            {"recoveryId": row[0], "issue": row[1], "failedAt": row[2], "detail": row[3],
             "reason": reasons.explain(row[1]).reason, "remedy": reasons.remedy(row[1], "isolated", [row[0]])}
            for row in failures.listed(conn)
        ]
        report["problems"] = problems(conn, (report["model"] or {}).get("baseUrl"))
        report["jobList"] = job_list(conn)
        report["lastDrainFailure"] = drainfailures.latest(conn)
        if history.recorded(version):
            report["history"] = history_report(history.summary(conn), cfg.trash_retention_ms)
        report["spend"] = usage.read(conn, cfg, brief=True)
        if report["spend"].get("blocked"):
            report["spend"]["importParts"] = observations.waiting_imports(conn)
        holder = drainlease.live_holder(conn)
        report["drain"] = {"alive": holder is not None, "pid": holder.pid if holder else None}
    finally:
        conn.close()
    return report


def sync_report(paths: DataPaths) -> dict | None:
    """Memory sync (``core/syncstate.py``): where to, and the last run's outcome with its reason and
    remedy; ``None`` when sync is not set up. Reads one small file, runs no git."""
    state = syncstate.read(paths)
    if state is None:
        return None
    last = state.get("last") or {}
    code = last.get("code")
    return {"remote": state.get("remote"), "branch": state.get("branch"),
            "lastAt": last.get("at"), "outcome": last.get("outcome"), "code": code, "lastOk": state.get("lastOk"),
            "reason": reasons.explain(code).reason if code else None,
            "remedy": reasons.explain(code).fix if code else None}


def sync_line(found: dict) -> str:
    where = f"{found['remote']} (branch {found['branch']})"
    if found["outcome"] is None:
        return f"{where}; not synced yet"
    when = _clock(found["lastAt"])
    if found["outcome"] == "ok" and not found["code"]:
        return f"{where}; last sync {when} ok"
    said = "ok, but" if found["outcome"] == "ok" else "FAILED"
    return f"{where}; last sync {when} {said} {found['code']}: {found['reason']}; remedy: {found['remedy']}"


def isolated_groups(rows: list[tuple[str, str, int, str | None]]) -> list[dict]:
    """Isolated sessions (``failures.listed``) grouped by code, most numerous first: the count,
    where the newest unexpected one surfaced, the reason, and one remedy for the whole group."""
    by_code: dict[str, list[tuple[str, str, int, str | None]]] = {}
    for row in rows:
        by_code.setdefault(row[1], []).append(row)
    groups = []
    for issue, members in sorted(by_code.items(), key=lambda item: (-len(item[1]), item[0])):
        groups.append({"issue": issue, "count": len(members), "detail": members[-1][3],
                       "reason": reasons.explain(issue).reason,
                       "remedy": reasons.remedy(issue, "isolated", [m[0] for m in members])})
    return groups


def healthy(report: dict) -> bool:
    """False when the configuration cannot be used or the data root is unsafe (``cm status`` exits 1)."""
    return "error" not in report["config"] and not report.get("dataRootProblem")


def history_report(found: history.Summary, retention_ms: int) -> dict:
    """Recorded versions and the trash; times as ``cm trash`` gives them (``history.iso``). The oldest
    trash entry is purged at the first drain start after ``oldestExpiresAt``."""
    oldest = found.oldest_removed_at
    return {"versions": found.versions, "trashed": found.trashed,
            "oldestTrashedAt": None if oldest is None else history.iso(oldest),
            "oldestExpiresAt": None if oldest is None else history.iso(oldest + retention_ms),
            "trashRetentionDays": retention_ms // 86_400_000}


# -- text rendering (cm status and the Processing Status screen) -----------------------------

def _clock(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _in(ms: int, now: int) -> str:
    seconds = max(0, (ms - now) // 1000)
    return f"in {seconds} s" if seconds < 120 else f"in {seconds // 60} min"


def _ids(ids: list, count: int) -> str:
    shown = ", ".join(str(i) for i in ids)
    return shown + (f", … ({count - len(ids)} more)" if count > len(ids) else "")


def job_line(job: dict, now: int, model_url: str | None = None) -> str:
    """One unfinished job: short id, state, code and when it runs next; a job waiting for a model
    server that did not answer names the configured ``model_url``."""
    text = f"{job['id']} {job['state']}"
    if job["issue"]:
        text += f" ({job['cause']})"
    if job["state"] == "retry" and job["issue"] == spend.CODE:
        text += ", waits while a spend cap is reached (see `spend:`)"
    elif job["state"] == "retry" and job["issue"] == "MODEL_UNREACHABLE" and model_url:
        text += f", nothing answered at {model_url}: start the model server or fix remote.baseUrl"
        if job["nextAttemptAt"] is not None:
            text += f"; next attempt {_clock(job['nextAttemptAt'])} ({_in(job['nextAttemptAt'], now)})"
    elif job["state"] == "retry" and job["nextAttemptAt"] is not None:
        text += f", next attempt {_clock(job['nextAttemptAt'])} ({_in(job['nextAttemptAt'], now)})"
    elif job["state"] == "running" and job["leaseExpiresAt"] is not None:
        text += ", in progress" if job["leaseExpiresAt"] > now else ", lease expired: resumed by the next drain"
    elif job["state"] in ("dead", "paused"):
        text += f", `cm retry {job['id']}` after fixing the cause"
    elif job["state"] == "quarantined":
        text += f", {reasons.remedy(job['issue'], 'quarantined', [job['id']])}"
    return text + f", {job['attempts']} attempt(s)"


def history_line(kept: dict) -> str:
    """History and the trash in one line."""
    text = f"{kept['versions']} section version(s) recorded (`cm history`); "
    if not kept["trashed"]:
        return text + "trash empty"
    expires = kept["oldestExpiresAt"]
    # One fixed ISO format in UTC: comparing the strings compares the times.
    when = (f"kept until {expires[:10]}" if expires > history.iso(int(time.time() * 1000))
            else "past its retention, purged when the next drain starts")
    return text + f"trash: {kept['trashed']} section(s), the oldest {when} (`cm trash`)"


def failure_line(failure: dict) -> str:
    """The last drain failure in one line: when, what, where, and whether it is behind us."""
    where = failure["frames"][-1] if failure["frames"] else "?"
    text = f"{_clock(failure['at'])} in {failure['process']}: {failure['code']} ({failure['exception']}) at {where}"
    if failure["message"]:
        text += f": {failure['message']}"
    if failure["jobId"]:
        text += f"; job {failure['jobId'][:SHORT_ID]} went back to retry"
    if failure["resolvedAt"]:
        text += f"; a later drain finished cleanly at {_clock(failure['resolvedAt'])}"
    return text


def problem_lines(report: dict) -> list[str]:
    """The grouped explanations ``cm status`` prints (the JSON holds the same fields)."""
    lines: list[str] = []
    now = int(time.time() * 1000)
    for group in report.get("problems", {}).get("quarantined", []):
        lines.append(f"quarantined: {group['count']} × {group['code']}: {group['reason']}")
        lines.append(f"             remedy: {group['remedy']} (observation ids {_ids(group['observationIds'], group['count'])})")
    for group in report.get("problems", {}).get("dead", []):
        lines.append(f"dead:        {group['count']} job(s) × {group['cause']} ({group['observations']} observation(s)): "
                     f"{group['reason']}")
        lines.append(f"             remedy: {group['remedy']}")
    for group in report.get("problems", {}).get("isolated", []):
        where = f" ({group['detail']})" if group.get("detail") else ""
        lines.append(f"isolated:    {group['count']} session(s) × {group['issue']}{where}: {group['reason']}")
        lines.append(f"             remedy: {group['remedy']}")
    for rejected in report.get("hookRejections", []):
        lines.append(f"hook:        {rejected['count']} × {rejected['code']} from {rejected['host']}: {rejected['message']}")
        lines.append("             remedy: the host was not blocked; check its hook settings (`cm agents`) if this keeps growing")
    model_url = (report.get("model") or {}).get("baseUrl")
    listing = report.get("jobList", {"jobs": [], "total": 0})
    for index, job in enumerate(listing["jobs"]):
        lines.append(f"{'job ids:' if index == 0 else '':<13}{job_line(job, now, model_url)}")
    if listing["total"] > len(listing["jobs"]):
        lines.append(f"{'':<13}… and {listing['total'] - len(listing['jobs'])} more (oldest listed first)")
    return lines
