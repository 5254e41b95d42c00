"""``cm demo``: the whole loop on a fresh temporary home, against a clearly labelled synthetic model.

It starts the synthetic model (``cmrunner.synthetic.fakemodel``, 127.0.0.1 only, bounded
lifetime) with its careful policy (``synthetic/careful.py``: a rule-based reader of a fixed
phrasebook, not a language model), writes a configuration that points at it (a throwaway key that
is not a secret) and registers a project, then plays Codex sessions through the real ``cm hook
codex`` entry as subprocesses (``synthetic.codexplay``). The hooks spawn the real detached drain,
which consumes the inbox, seals each session's batch at its end, runs the real Memory Agent over
the Responses protocol against the synthetic model and commits.

Session 1 states a preference, a fact about the user, a project fact and a colleague's habit; the
demo prints the resulting Markdown (each statement under a topic heading in its own document, the
colleague's habit left out), what ``cm show`` gives consumers and the receipt. Session 2 starts
with that memory injected, corrects the preference and asks to forget the fact; the demo prints
the Markdown again. The last line says whether every step did what it should; if not, the
generator ends with ``CmError("DEMO_FAILED")`` so ``cm demo`` exits 1.

Where: a new temporary folder (the home is its ``home/``), removed at the end unless ``keep``;
or ``demo_home``, a folder the user names (``cm demo --home DIR``), which must be absent or empty
(``DEMO_HOME_NOT_EMPTY``: it never overwrites a configuration, ``.env`` or data) and is always kept,
its demo files (the project folder, transcripts, the model's files) under ``DIR/demo/``. It never
touches the user's own home. A kept home is a working home: the last lines are the exact
commands to look at it, and ``cm synthetic-model serve --port N`` brings back the model its
configuration points at. Without ``keep`` the last line says the home was removed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from cmrunner.core import config as config_mod, envfile, projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import codexplay, fakemodel
from cmrunner.views import status as status_mod, usage as usage_mod

FIRST = (("I prefer tabs over spaces in Go code.", "Tabs in Go, noted."),
         ("I live in Lisbon.", "Noted."),
         ("This project uses SQLite for storage.", "SQLite it is."),
         ("My colleague Dana prefers Emacs for everything.", "Emacs has its fans."))
SECOND = (("Actually, I now prefer spaces over tabs in Go code.", "Spaces from now on."),
          ("Forget that I live in Lisbon.", "Forgotten."))
PROMPTS = tuple(user for user, _ in FIRST)
KEY_NAME = "COMMON_MEMORY_API_KEY"
PROJECT = "tidewatch"


def _wait_for_drain(home: str, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report = status_mod.gather(home)
        if not report["drain"]["alive"] and not report["inbox"]["codex"] \
                and not report["observations"].get("pending") and not report["observations"].get("claimed"):
            return True
        time.sleep(0.1)
    return False


def _session(session: codexplay.Session, turns: tuple[tuple[str, str], ...], note: str,
             injected: list[str]) -> Iterator[str]:
    """Play one session; what its SessionStart injected is appended to ``injected``."""
    result = session.start()
    injected.append(result.out.get("hookSpecificOutput", {}).get("additionalContext", ""))
    yield f"  SessionStart      exit {result.code}, {result.ms:5.1f} ms   ({note})"
    for n, (user, assistant) in enumerate(turns, start=1):
        prompt, stop = session.turn(n, user, assistant)
        yield f"  UserPromptSubmit  exit {prompt.code}, {prompt.ms:5.1f} ms   you: {user}"
        yield f"  Stop              exit {stop.code}, {stop.ms:5.1f} ms"
    result = session.end()
    yield f"  SessionEnd        exit {result.code}, {result.ms:5.1f} ms   (a real end seals the session's batch)"


def _documents(paths: DataPaths, targets: list[str]) -> Iterator[str]:
    for target in targets:
        path = paths.document(target)
        if os.path.exists(path):
            yield f"----- {path}"
            with open(path, encoding="utf-8") as handle:
                yield handle.read().rstrip("\n")


def _read(paths: DataPaths, target: str) -> str:
    path = paths.document(target)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def prepare(demo_home: str | None) -> tuple[str, str]:
    """(home, folder for the demo's own files), created fresh; see the module contract."""
    if demo_home is None:
        root = tempfile.mkdtemp(prefix="cm-demo-")
        return os.path.join(root, "home"), root
    if os.path.lexists(demo_home) and (not os.path.isdir(demo_home) or os.path.islink(demo_home)
                                       or os.listdir(demo_home)):
        raise CmError("DEMO_HOME_NOT_EMPTY", f"{demo_home} is not an empty folder; the demo writes only into a new "
                                             "or empty one: pass another --home")
    os.makedirs(demo_home, mode=0o700, exist_ok=True)
    root = os.path.join(demo_home, "demo")
    os.mkdir(root, 0o700)
    return demo_home, root


def next_steps(home: str, work: str, port: int) -> Iterator[str]:
    """The exact commands for a kept home."""
    cm = f"cm --home {shlex.quote(home)}"
    workspace = f"--workspace {shlex.quote(work)}"
    yield f"next:        {cm} show {workspace}     # what your agents would receive"
    for command, why in (("history", "every version, newest first"), ("trash", "what the second session forgot"),
                         (f"codex-config {workspace}", "a Codex profile for this home"),
                         (f"mcp-config {workspace}", "MCP server blocks for this home")):
        yield f"             {cm} {command}     # {why}"
    yield (f"             cm synthetic-model serve --port {port}     # bring back the synthetic model this home is "
           "configured with, so new sessions are written to memory")


def run(keep: bool = False, demo_home: str | None = None) -> Iterator[str]:
    started = time.perf_counter()
    home, root = prepare(demo_home)
    keep = keep or demo_home is not None
    work = os.path.join(root, PROJECT)
    os.mkdir(work)
    failed: list[str] = []
    port = 0
    try:
        with fakemodel.running(os.path.join(root, "synthetic-model"), {"policy": "careful"}) as model:
            port = model.port
            data = config_mod.default_config(home)
            paths = DataPaths(data["dataRoot"])
            config_mod.save(home, data)
            project = projects.register(paths, work, PROJECT)
            target = project.scope
            data["disclosure"]["allowedScopes"] = data["writableScopes"] = ["global", target]
            data["remote"] = {"provider": "openai-compatible", "baseUrl": model.base_url,
                              "model": "synthetic-demo-model", "apiKeyEnv": KEY_NAME, "apiKeySource": "private-env",
                              "api": "responses", "proxy": {"mode": "direct"}}
            config_mod.save(home, data)
            envfile.update(home, {KEY_NAME: "demo-key-not-a-secret"})
            targets = ["profile", "preferences", target]
            kind = "kept after the demo" if keep else "temporary, removed at the end"
            yield f"home:        {home} ({kind}; your own home is never touched)"
            yield (f"model:       SYNTHETIC — cm's own fake model at {model.base_url} (no network, no key), with "
                   "its careful policy: a few rules for a fixed phrasebook, not a language model")
            yield f"project:     {work} is registered as {target}"
            yield "session 1:   a Codex session in the project, played through the real `cm hook codex`"
            injected: list[str] = []
            yield from _session(codexplay.Session(root, "demo-1", home, work), FIRST, "memory is empty so far",
                                injected)
            settled = _wait_for_drain(home)
            yield f"drain:       {'consumed the inbox, ran the Memory Agent and committed' if settled else 'STILL BUSY after 60 s'}"
            calls = len(model.model_requests())
            yield f"             the Memory Agent made {calls} model requests (reading through cm's tools, then one decision)"
            yield "             each statement is filed under a topic heading in its document; the colleague's habit is not the user's"
            yield ""
            yield from _documents(paths, targets)
            prefs, profile = _read(paths, "preferences"), _read(paths, "profile")
            if not settled or "## Indentation" not in prefs or "## Location" not in profile \
                    or "## Database" not in _read(paths, target) or "Emacs" in prefs + profile:
                failed.append("session 1 did not leave the expected memory")
            yield ""
            show = subprocess.run([sys.executable, "-I", "-m", "cmrunner", "--home", home, "show", "--plain",
                                   "--workspace", work], capture_output=True, text=True, timeout=60)
            yield "----- cm show --plain --workspace <project> (exactly what consumers receive)"
            yield show.stdout.rstrip("\n")
            yield ""
            receipts = sorted(os.listdir(paths.receipts)) if os.path.isdir(paths.receipts) else []
            for name in receipts[:1]:
                yield f"----- receipt {name} (ids and hashes only)"
                with open(os.path.join(paths.receipts, name), encoding="utf-8") as handle:
                    yield json.dumps(json.load(handle), indent=2)
            yield ""
            yield "session 2:   the next session receives that memory, then corrects the preference and forgets a fact"
            yield from _session(codexplay.Session(root, "demo-2", home, work), SECOND,
                                "its injected memory holds what session 1 left", injected)
            carried = "Prefers tabs over spaces in Go code." in injected[-1] and "Uses SQLite for storage." in injected[-1]
            yield f"injection:   session 2's memory {'carried what session 1 said' if carried else 'did NOT carry session 1'}"
            settled = _wait_for_drain(home)
            yield f"drain:       {'committed the correction and the forget' if settled else 'STILL BUSY after 60 s'}"
            yield f"             the Memory Agent made {len(model.model_requests()) - calls} model requests"
            yield ""
            yield from _documents(paths, ["profile", "preferences"])
            prefs, profile = _read(paths, "preferences"), _read(paths, "profile")
            corrected = "spaces over tabs" in prefs and "tabs over spaces" not in prefs
            forgotten = "Lisbon" not in profile
            yield ""
            gone = "Lisbon is gone (in the trash, restorable for 30 days)"
            yield (f"correction:  {'the old preference was replaced' if corrected else 'the old preference is STILL there'}; "
                   f"forget: {gone if forgotten else 'Lisbon is STILL there'}")
            if not (carried and settled and corrected and forgotten):
                failed.append("session 2 did not correct and forget as asked")
            spent = usage_mod.gather(home)["total"]
            yield (f"spend:       {usage_mod.totals_text(spent)} (the disclosure ledger; `cm usage` shows yours, "
                   "and spend caps bound it)")
        yield f"total:       {time.perf_counter() - started:.1f} s"
    finally:
        if keep:
            yield f"kept:        {home} (a working home; its configuration points at the synthetic model)"
            yield from next_steps(home, work, port)
        else:
            shutil.rmtree(root, ignore_errors=True)
            yield (f"removed:     {root} (the demo's temporary home); `cm demo --keep` keeps one to explore, "
                   "or `cm demo --home DIR` fills an empty folder you choose")
    if failed:
        where = f"`cm --home {home} status`" if keep else "`cm demo --keep`, then `cm --home <its home> status`"
        raise CmError("DEMO_FAILED", "; ".join(failed) + f"; see {where}")
