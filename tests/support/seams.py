"""Test-only seams installed into cm processes that run on the overlay interpreter (``overlay.py``).

Why: the crash suite, the drain tests and the end-to-end tests must SIGKILL a real drain at a
commit step, drive it with a scripted Memory Agent instead of a model, and make it exit without
its idle linger. Production cm reads none of this (``tests/test_seams.py`` proves it); only a
process started from the overlay's interpreter imports this module, from a ``.pth`` file of the
overlay's own site-packages. The drain is spawned as ``sys.executable -I -m cmrunner …``: ``-I``
ignores ``PYTHONPATH`` and user site-packages but still reads the site-packages of the venv it
runs in, so every drain a seamed hook spawns is seamed too.

Variables (read here, never by cm):
- ``CM_TEST_AGENT_SCRIPT``: a JSON file ``{"decisions": [<decision template>, ...]}``; the drain's
  ``agent_port`` becomes a ``ScriptedPort`` answering from it. The template for a job is chosen by
  its first evidence id (``(id - 1) % len``), so a re-run after a crash submits the same decision.
  In a template, ``"$EVIDENCE"`` (as a whole ``evidence`` value) becomes every current evidence
  handle and ``{first}`` inside strings the first observation id.
- ``CM_TEST_AGENT_CALLS``: with the script, every agent call appends its job id to this file, so a
  test can prove that recovery made no call.
- ``CM_TEST_FAULT``: ``point`` or ``point:N``; ``publish.fault`` SIGKILLs the process at the N-th
  call (from 1) naming ``point``.
- ``CM_TEST_DRAIN_LINGER_MS``: the drain's idle linger (``drain.LINGER_MS``), 0..60000.
- ``CM_TEST_TXN_WRITE_FAIL``: ``N``; the Agent Integration transaction's N-th file write
  (``integrations.txn._write``, from 1) raises ``OSError(ENOSPC)``, as a full disk would.

Mechanism: ``install`` puts a finder first on ``sys.meta_path`` that lets the normal finders load
``cmrunner.writer_proc.drain`` / ``…publish`` and then replaces the seam attribute on the fresh
module, so nothing is imported early and a hook process (which never imports them) is unaffected.
Stdlib only, and only ``os``/``site``/``sys`` at start-up: a seamed hook stays light.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Callable
from types import ModuleType

SCRIPT_ENV = "CM_TEST_AGENT_SCRIPT"
CALLS_ENV = "CM_TEST_AGENT_CALLS"
FAULT_ENV = "CM_TEST_FAULT"
LINGER_ENV = "CM_TEST_DRAIN_LINGER_MS"
TXN_FAIL_ENV = "CM_TEST_TXN_WRITE_FAIL"
VARIABLES = (SCRIPT_ENV, CALLS_ENV, FAULT_ENV, LINGER_ENV, TXN_FAIL_ENV)

_installed = False


def make_fault(spec: str) -> Callable[[str], None]:
    """A ``publish.fault`` replacement that SIGKILLs this process at the call ``spec`` names."""
    name, _, nth = spec.partition(":")
    wanted = int(nth) if nth.isdigit() else 1
    counts: dict[str, int] = {}

    def fault(point: str) -> None:
        if point != name:
            return
        counts[point] = counts.get(point, 0) + 1
        if counts[point] == wanted:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)

    return fault


def _fill(value: object, first: int, evidence: list[str]) -> object:
    if isinstance(value, dict):
        return {k: (evidence if k == "evidence" and v == "$EVIDENCE" else _fill(v, first, evidence))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, first, evidence) for v in value]
    if isinstance(value, str):
        return value.replace("{first}", str(first))
    return value


def scripted_port(script_path: str, calls_path: str | None) -> object:
    """A ``ScriptedPort`` answering every job from the templates in ``script_path``."""
    import json

    from cmrunner.writer_proc.port import ScriptedPort

    with open(script_path, encoding="utf-8") as handle:
        templates = json.load(handle)["decisions"]

    def script(task: dict, reads: object) -> object:
        if calls_path:
            with open(calls_path, "a", encoding="utf-8") as log:
                log.write(task["request_id"] + "\n")
        sources = reads.sources.values()  # type: ignore[attr-defined]
        evidence = sorted((s.evidence_ref for s in sources if not s.context_only), key=lambda h: int(h[3:]))
        first = int(evidence[0][3:]) if evidence else 0
        body = _fill(templates[(first - 1) % len(templates)], first, evidence)
        return {"version": "memory_maintenance_v2", "request_id": task["request_id"], "decisions": body}

    return ScriptedPort(script)


def _patch_drain(module: ModuleType) -> None:
    script = os.environ.get(SCRIPT_ENV)
    if script:
        calls = os.environ.get(CALLS_ENV) or None
        module.agent_port = lambda _cfg: scripted_port(script, calls)  # type: ignore[attr-defined]
    linger = os.environ.get(LINGER_ENV)
    if linger is not None:
        module.LINGER_MS = max(0, min(60_000, int(linger)))  # type: ignore[attr-defined]


def _patch_publish(module: ModuleType) -> None:
    spec = os.environ.get(FAULT_ENV)
    if spec:
        module.fault = make_fault(spec)  # type: ignore[attr-defined]


def _patch_txn(module: ModuleType) -> None:
    wanted = int(os.environ[TXN_FAIL_ENV])
    original = module._write  # type: ignore[attr-defined]
    calls: list[str] = []

    def failing(path: str, data: bytes, mode: int) -> None:
        calls.append(path)
        if len(calls) == wanted:
            import errno

            raise OSError(errno.ENOSPC, "No space left on device")
        original(path, data, mode)

    module._write = failing  # type: ignore[attr-defined]


class _Patching:
    """Loads a module with its real loader, then applies a patch to it."""

    def __init__(self, loader: object, patch: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.patch = patch

    def create_module(self, spec: object) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)  # type: ignore[attr-defined]
        self.patch(module)


class _AfterImport:
    """A meta-path finder that patches named modules right after their normal import."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        patch = self.patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                spec.loader = _Patching(spec.loader, patch)
                return spec
        return None


def install(real_site_packages: str) -> None:
    """Called from the overlay's ``.pth`` (site may run it twice): add cm's real site-packages, and
    the patches the environment asks for."""
    global _installed
    if _installed:
        return
    _installed = True
    site.addsitedir(real_site_packages)
    patches: dict[str, Callable[[ModuleType], None]] = {}
    if os.environ.get(SCRIPT_ENV) or os.environ.get(LINGER_ENV) is not None:
        patches["cmrunner.writer_proc.drain"] = _patch_drain
    if os.environ.get(FAULT_ENV):
        patches["cmrunner.writer_proc.publish"] = _patch_publish
    if os.environ.get(TXN_FAIL_ENV):
        patches["cmrunner.manage.integrations.txn"] = _patch_txn
    if patches:
        sys.meta_path.insert(0, _AfterImport(patches))
