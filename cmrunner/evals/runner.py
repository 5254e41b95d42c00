"""Running worlds: each in a fresh temporary home, through cm's real entries, drain and Writer.

Contract:
- ``run_world(world, model, judge)`` makes a temporary folder (never the user's home), writes a
  configuration that points at the model under test (for ``--synthetic``: the fake model, started
  on 127.0.0.1 for this world alone), registers the world's projects and authorizes them, then
  plays each session in order: a Codex conversation through real ``cm hook codex`` subprocesses
  (``synthetic.codexplay``), or ``cm import --no-wait``. After each session it waits until the
  detached drain has consumed and committed everything (``settle``). Then it opens a new session
  where an ``injected`` check asks, reads the Markdown, evaluates the checks, asks the judge (if
  any) and reads the world's cost from its ledger. The drain is stopped by its PID and the folder
  removed in every case, with the model key in it (``keep``: moved to ``keep/<world id>`` for
  inspection, its private ``.env`` deleted first).
- A world whose work cannot finish — a dead or quarantined job, an isolated session, a hook or
  import that failed, a drain that stopped, nothing settled in ``SETTLE_SECONDS`` — is reported
  ``not_run`` with the code cm recorded (the codes ``cm status`` shows); the rest go on.
- ``run(worlds, model, judge, jobs)`` runs worlds on ``jobs`` threads and yields a ``Progress``
  event as each one finishes; the generator's return value is the ``report.Report``. It never
  prints. ``drive(generator, on_progress)`` runs one to its end and returns the report.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import NamedTuple

from cmrunner.capture import codex_inbox, failures, observations, pi_inbox
from cmrunner.core import config as config_mod, drainfailures, drainlease, envfile, projects, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.evals import checks, cost, judge as judge_mod, report as report_mod, world as world_mod
from cmrunner.evals.models import KEY_NAME, SYNTHETIC_KEY, Judge, ModelUnderTest, synthetic_remote
from cmrunner.synthetic import codexplay, fakemodel
from cmrunner.views import status as status_mod

SETTLE_SECONDS = 300.0
POLL_SECONDS = 0.05
STOP_SECONDS = 5.0
STALL_SECONDS = 1.0
MODEL_LIFETIME = 3600.0
GLOBAL_FOLDER = "global"


class Progress(NamedTuple):
    done: int
    total: int
    world: str
    status: str  # passed, failed or not_run


class NotRun(CmError):
    """A world whose work could not finish; ``code`` is the one cm recorded."""


# -- the temporary home ------------------------------------------------------------------------

def _prepare(home: str, work: str, world: world_mod.World, remote: dict, private: dict[str, str]) -> dict[str, str]:
    """Configuration, private .env and projects of a new home; ``{world project id: registered id}``."""
    data = config_mod.default_config(home)
    paths = DataPaths(data["dataRoot"])
    os.makedirs(home, mode=0o700)
    store.prepare_data_root(paths)
    registered = {}
    for project in world.projects:
        folder = os.path.join(work, project.id)
        os.makedirs(folder)
        registered[project.id] = projects.register(paths, folder, project.name).id
    scopes = ["global", *(f"project:{pid}" for pid in registered.values())]
    provenance = ["user_explicit"]
    if any(s.import_ is not None for s in world.sessions):
        provenance.append("document_import")
    if world.context:
        provenance.append("conversation_context")
    data["disclosure"].update(allowedScopes=scopes, allowedProvenance=provenance)
    data["writableScopes"] = list(scopes)
    data["remote"] = remote
    config_mod.save(home, data)
    envfile.update(home, dict(private))
    return registered


@contextmanager
def _model(model: ModelUnderTest, root: str) -> Iterator[tuple[dict, dict[str, str]]]:
    """The remote section and private values of this world's home (a fake model for synthetic runs)."""
    if model.policy is None:
        assert model.remote is not None
        yield model.remote, model.private
        return
    with fakemodel.running(os.path.join(root, "model"), {"policy": model.policy},
                           lifetime_seconds=MODEL_LIFETIME) as fake:
        yield synthetic_remote(fake.base_url), {KEY_NAME: SYNTHETIC_KEY}


# -- waiting for the drain ------------------------------------------------------------------------

def _stuck(conn: sqlite3.Connection) -> NotRun | None:
    """The first thing that will not move by itself, as ``cm status`` reports it."""
    found = status_mod.problems(conn)
    for group in found["dead"] + found["quarantined"]:
        return NotRun(group["code"] or "DEAD_JOB", f"{group['reason']} ({group['count']})")
    return None


def settle(paths: DataPaths, seconds: float = SETTLE_SECONDS) -> None:
    """Wait until everything queued was processed; ``NotRun`` with cm's code if it cannot be."""
    deadline = time.monotonic() + seconds
    idle_since: float | None = None  # when work was first seen with no drain alive
    while True:
        conn = store.open_existing(paths)
        if conn is not None:
            try:
                inbox = codex_inbox.waiting(conn)[0] + pi_inbox.waiting(conn)
                states = observations.count_by_state(conn)
                stuck = _stuck(conn)
                live = drainlease.live_holder(conn) is not None
                failure = drainfailures.latest(conn)
                isolated = failures.listed(conn)
                waiting = [j["issue"] for j in status_mod.job_list(conn)["jobs"] if j["issue"]]
            finally:
                conn.close()
            if stuck is not None:
                raise stuck
            if isolated:
                raise NotRun(isolated[0][1], "a session was isolated")
            if not inbox and not any(states.get(s) for s in ("buffered", "pending", "claimed")):
                return
            if live:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > STALL_SECONDS:
                # Work is left and no drain will come back for it: a failed drain, or a job whose
                # next attempt is beyond the drain's wait bound.
                if failure is not None and failure["resolvedAt"] is None:
                    raise NotRun(failure["code"], "the drain stopped on a failure")
                raise NotRun(waiting[0] if waiting else "EVAL_STALLED", "work is left and no drain is running")
        if time.monotonic() > deadline:
            raise NotRun("EVAL_TIMEOUT", f"the queue did not settle within {seconds:.0f} s")
        time.sleep(POLL_SECONDS)


def _stop_drain(paths: DataPaths) -> None:
    """Stop this home's drain (if one lingers) by its PID and wait for it to go."""
    deadline = time.monotonic() + STOP_SECONDS
    signalled = False
    while time.monotonic() < deadline:
        conn = store.open_existing(paths)
        if conn is None:
            return
        try:
            holder = drainlease.live_holder(conn)
        finally:
            conn.close()
        if holder is None:
            return
        if not signalled:
            try:
                os.kill(holder.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
            signalled = True
        time.sleep(POLL_SECONDS)


# -- playing sessions ----------------------------------------------------------------------------

def _failure(stderr: str, fallback: str, what: str) -> NotRun:
    """A failed ``cm`` subprocess as ``NotRun``, with the code of its ``cm: CODE: message`` line."""
    lines = stderr.strip().splitlines()
    parts = lines[-1].split(":") if lines else []
    code = parts[1].strip() if len(parts) > 2 and parts[0] == "cm" else fallback
    return NotRun(code, what)


def _hook(result: codexplay.HookResult, event: str) -> None:
    if result.code != 0:
        raise _failure(result.stderr, "HOOK_FAILED", f"{event} exited {result.code}")


def _play(root: str, home: str, cwd: str, name: str, session: world_mod.Session) -> None:
    if session.import_ is not None:
        path = os.path.join(root, session.import_.name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(session.import_.text)
        done = subprocess.run([sys.executable, "-I", "-m", "cmrunner", "import", path, "--workspace", cwd,
                               "--no-wait", "--home", home], capture_output=True, timeout=120)
        if done.returncode != 0:
            raise _failure(done.stderr.decode("utf-8", "replace"), "IMPORT_FAILED", "cm import failed")
        return
    player = codexplay.Session(root, name, home, cwd)
    _hook(player.start(), "SessionStart")
    for n, turn in enumerate(session.turns, start=1):
        prompt, stop = player.turn(n, turn.user, turn.assistant)
        _hook(prompt, "UserPromptSubmit")
        _hook(stop, "Stop")
    _hook(player.end(), "SessionEnd")


def _injections(root: str, home: str, folders: dict[str | None, str], wanted: set[str | None]) -> dict[str | None, str]:
    """What a new session receives in each folder a check asks about."""
    received = {}
    for n, project in enumerate(sorted(wanted, key=lambda p: p or "")):
        result = codexplay.Session(root, f"probe-{n}", home, folders[project]).start()
        _hook(result, "SessionStart")
        received[project] = result.out.get("hookSpecificOutput", {}).get("additionalContext", "")
    return received


# -- one world ------------------------------------------------------------------------------------

def _evaluate(world: world_mod.World, memory: checks.Memory, injected: dict[str | None, str],
              judge: Judge | None) -> tuple[list[report_mod.CheckResult], list[report_mod.JudgeResult]]:
    results, verdicts = [], []
    for check in world.checks:
        if isinstance(check, world_mod.Judge):
            if judge is not None:
                verdict = judge_mod.ask(judge, check.question, memory.where(check.where))
                verdicts.append(report_mod.JudgeResult.model_validate(
                    {"class": check.class_, "question": check.question, "verdict": verdict.verdict,
                     "reason": verdict.reason}))
            continue
        outcome = checks.evaluate(check, memory, injected)
        results.append(report_mod.CheckResult.model_validate(
            {"class": check.class_, "kind": check.kind, "passed": outcome.passed, "detail": outcome.detail,
             "quote": outcome.quote}))
    return results, verdicts


def make_keep(path: str) -> None:
    """The new, private folder ``--keep`` names (``KEEP_EXISTS`` / ``KEEP_UNWRITABLE`` otherwise)."""
    if os.path.lexists(path):
        raise CmError("KEEP_EXISTS", f"{path} already exists; name a new folder for --keep")
    try:
        os.makedirs(path, mode=0o700)
    except OSError:
        raise CmError("KEEP_UNWRITABLE", f"{path} cannot be created; name a folder you can write to") from None


def _keep(root: str, home: str, keep: str | None, world_id: str) -> None:
    """Remove the folder, or (``keep``) move it to ``keep/<world id>`` without the private .env."""
    if keep is None:
        shutil.rmtree(root, ignore_errors=True)
        return
    try:
        os.unlink(os.path.join(home, ".env"))
    except FileNotFoundError:
        pass
    shutil.move(root, os.path.join(keep, world_id))


def run_world(world: world_mod.World, model: ModelUnderTest, judge: Judge | None,
              keep: str | None = None) -> report_mod.WorldResult:
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="cm-eval-")
    home, work = os.path.join(root, "home"), os.path.join(root, "work")
    paths = DataPaths(config_mod.default_config(home)["dataRoot"])

    def result(status: report_mod.Status, **fields: object) -> report_mod.WorldResult:
        spent = cost.world_cost(paths)
        return report_mod.WorldResult.model_validate({
            "id": world.id, "title": world.title, "classes": list(world.classes), "userTurns": world.user_turns,
            "status": status, "seconds": round(time.monotonic() - started, 2),
            "cost": spent, **fields})

    try:
        os.makedirs(os.path.join(work, GLOBAL_FOLDER))
        with _model(model, root) as (remote, private):
            try:
                registered = _prepare(home, work, world, remote, private)
                folders: dict[str | None, str] = {p.id: os.path.join(work, p.id) for p in world.projects}
                folders[None] = os.path.join(work, GLOBAL_FOLDER)
                for i, session in enumerate(world.sessions):
                    _play(root, home, folders[session.project], f"s{i + 1}", session)
                    settle(paths)
                wanted = {c.project for c in world.checks if isinstance(c, (world_mod.Injected, world_mod.NotInjected))}
                injected = _injections(root, home, folders, wanted)
                memory = checks.Memory.read(paths, registered)
                results, verdicts = _evaluate(world, memory, injected, judge)
            except CmError as exc:  # NotRun, or a setup step cm refused
                return result("not_run", code=exc.code, message=exc.message)
            finally:
                _stop_drain(paths)
        return result("passed" if all(r.passed for r in results) else "failed", checks=results, judge=verdicts)
    finally:
        _keep(root, home, keep, world.id)


# -- the suite -------------------------------------------------------------------------------------

def run(worlds: list[world_mod.World], model: ModelUnderTest, judge: Judge | None, jobs: int,
        keep: str | None = None) -> Generator[Progress, None, report_mod.Report]:
    started = time.monotonic()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, report_mod.WorldResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="cm-eval") as pool:
        pending: dict[Future[report_mod.WorldResult], world_mod.World] = {
            pool.submit(run_world, w, model, judge, keep): w for w in worlds}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    world = pending.pop(future)
                    results[world.id] = future.result()
                    yield Progress(len(results), len(worlds), world.id, results[world.id].status)
        finally:
            for future in pending:
                future.cancel()
    ordered = [results[w.id] for w in worlds]
    return report_mod.build(ordered, model.describe(), judge.label if judge else None, stamp,
                            round(time.monotonic() - started, 2))


def drive(generator: Generator[Progress, None, report_mod.Report],
          on_progress: Callable[[Progress], None] = lambda _p: None) -> report_mod.Report:
    while True:
        try:
            on_progress(next(generator))
        except StopIteration as stop:
            return stop.value
