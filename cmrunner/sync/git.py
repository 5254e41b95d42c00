"""The real ``git`` binary, run for the memory repository with a deadline and nothing secret said.

Contract:
- ``Git(paths)`` runs ``git --git-dir=<runtime>/sync/repo.git --work-tree=<memory>`` (module
  ``core/syncstate.py`` says why the git directory is outside ``memory/``). No git binary on PATH is
  ``GIT_NOT_FOUND``.
- Every run has a deadline (``timeout``): a run past it is killed with its process group and is
  ``SYNC_TIMEOUT``. ``Git.limit(seconds)`` adds an overall deadline for every run after it (an
  automatic sync's, ``sync.autoDeadlineSeconds``): each run gets at most the time left, one that
  would start past it does not start, and both are ``SYNC_TIMEOUT`` naming that deadline. A git
  killed mid-step leaves the repository as it was (objects are written before the one ref
  update that names them, ``update-ref`` is atomic) and never a memory file: git writes none.
  ``GIT_TERMINAL_PROMPT=0`` and ``GIT_ASK_YESNO=false``: git never waits for a person; the
  user's credential helpers and ssh agent still apply (their environment is kept).
- A failure is ``GitFailed`` (a ``CmError``) whose message is the command's name and exit code
  only; git's own words are classified (``classify``) and never repeated: they may quote the
  remote URL with its token. ``stdout`` is returned as bytes, untouched.
- Commits are authored as ``cm on <device>`` so history and ``git log`` name the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

from cmrunner.core import syncstate
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

DEFAULT_TIMEOUT = 60.0
CODES = ("GIT_NOT_FOUND", "GIT_FAILED", "SYNC_TIMEOUT")  # what a run raises
INDEX_ENV = "GIT_INDEX_FILE"
_REDIRECTS = frozenset({"GIT_DIR", "GIT_WORK_TREE", INDEX_ENV, "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE"})
MARKER = ".cm-memory"
MARKER_TEXT = b"cm memory\nformat: 1\n"

_UNREACHABLE = re.compile(r"could not resolve|connection refused|timed out|unable to access|could not read from remote|"
                          r"does not appear to be a git repository|no such file or directory|not found|"
                          r"network is unreachable|host key verification failed|permission denied", re.I)
_CORRUPT = re.compile(r"is corrupt|object corrupt|inflate: data stream error|unable to unpack|bad object|"
                      r"hash mismatch|sha1 mismatch|missing (?:blob|tree|commit) object", re.I)
_REJECTED = re.compile(r"\[rejected\]|non-fast-forward|fetch first|stale info|\[remote rejected\]|pre-receive hook", re.I)


class GitFailed(CmError):
    """A git command failed; ``kind`` is ``corrupt`` (an object of this repository does not read),
    ``unreachable``, ``rejected`` or ``other``."""

    def __init__(self, code: str, message: str, kind: str, returncode: int) -> None:
        super().__init__(code, message)
        self.kind = kind
        self.returncode = returncode


def classify(stderr: str) -> str:
    # git's own lines about this repository's objects (not the remote's, which git prefixes
    # "remote:"): the sync repository is damaged, whatever the step was.
    local = "\n".join(line for line in stderr.splitlines() if not line.startswith("remote:"))
    if _CORRUPT.search(local):
        return "corrupt"
    if _REJECTED.search(stderr):
        return "rejected"
    if _UNREACHABLE.search(stderr):
        return "unreachable"
    return "other"


def binary() -> str:
    found = shutil.which("git")
    if found is None:
        raise CmError("GIT_NOT_FOUND", "memory sync needs git and none is on PATH; install git, then run the "
                                       "command again")
    return found


class Git:
    """git for one data root's memory repository."""

    def __init__(self, paths: DataPaths, device: str | None = None) -> None:
        self.exe = binary()
        self.git_dir = syncstate.git_dir(paths)
        self.work_tree = paths.memory
        self.device = device or syncstate.device_name()  # callers with a home pass its configured name
        self.deadline: float | None = None  # time.monotonic() of the overall deadline, if any
        self.overall = 0.0

    def limit(self, seconds: float) -> None:
        """Every run from now on ends by ``seconds`` from now (module contract)."""
        self.deadline, self.overall = time.monotonic() + seconds, seconds

    def left(self) -> float | None:
        """Seconds left before the overall deadline (``None``: there is none)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def past_deadline(self, where: str) -> GitFailed:
        """``SYNC_TIMEOUT`` for the overall deadline; ``where`` says what it cut ("at git fetch")."""
        return GitFailed("SYNC_TIMEOUT", f"the automatic sync ran into its deadline of {self.overall:.0f} s "
                                         f"(sync.autoDeadlineSeconds) {where}; nothing was lost and what "
                                         "was committed stays committed locally; cm tries again later (or run "
                                         "`cm sync`)", "unreachable", -9)

    def env(self) -> dict[str, str]:
        # The user's environment (credential helpers, ssh agent) minus what would point git elsewhere.
        env = {name: value for name, value in os.environ.items() if name not in _REDIRECTS}
        env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASK_YESNO": "false", "LC_ALL": "C",
                    "GIT_AUTHOR_NAME": f"cm on {self.device}", "GIT_AUTHOR_EMAIL": "cm@localhost",
                    "GIT_COMMITTER_NAME": f"cm on {self.device}", "GIT_COMMITTER_EMAIL": "cm@localhost"})
        return env

    def run(self, *args: str, input: bytes | None = None, timeout: float = DEFAULT_TIMEOUT,
            check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        where = [] if args[0] == "init" else [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
        argv = [self.exe, *where, "-c", "core.quotepath=off", "-c", "gc.auto=0", *args]
        left = self.left()
        if left is not None and left <= 0:
            raise self.past_deadline(f"at git {args[0]}")
        overall = left is not None and left < timeout
        if overall:
            assert left is not None
            timeout = left
        try:
            process = subprocess.Popen(argv, cwd="/",
                                       env={**self.env(), **(env or {})}, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError:
            raise CmError("GIT_NOT_FOUND", "git could not be started; check that git is installed and runs") from None
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.communicate()
            if overall:
                raise self.past_deadline(f"at git {args[0]}") from None
            raise GitFailed("SYNC_TIMEOUT", f"git {args[0]} took longer than {timeout:.0f} s; nothing was lost, cm "
                                            "tries again later (or run `cm sync`)", "unreachable", -9) from None
        if check and process.returncode != 0:
            kind = classify(err.decode("utf-8", "replace"))
            raise GitFailed("GIT_FAILED", f"git {args[0]} failed (exit {process.returncode}); your memory files are "
                                          "untouched: run `cm sync repair`, then `cm sync`", kind, process.returncode)
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def out(self, *args: str, timeout: float = DEFAULT_TIMEOUT, env: dict[str, str] | None = None) -> str:
        return self.run(*args, timeout=timeout, env=env).stdout.decode("utf-8", "replace").strip()

    def ok(self, *args: str) -> bool:
        return self.run(*args, check=False).returncode == 0

    def rev(self, ref: str) -> str | None:
        found = self.run("rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False)
        return found.stdout.decode().strip() if found.returncode == 0 else None

    def blob(self, commit: str | None, path: str) -> bytes | None:
        """The bytes of ``path`` in ``commit``, or ``None`` when it is not there. An object that is
        there but does not read is ``SYNC_REPO_CORRUPT``: taken for absent, a merge base's copy
        would turn every section into a conflict."""
        if commit is None:
            return None
        found = self.run("cat-file", "blob", f"{commit}:{path}", check=False)
        if found.returncode == 0:
            return found.stdout
        if classify(found.stderr.decode("utf-8", "replace")) == "corrupt":
            raise GitFailed("SYNC_REPO_CORRUPT", f"the sync repository is damaged: {path}'s copy does not read; your "
                                                 "memory files are untouched; run `cm sync repair` (it rebuilds it "
                                                 "from your memory files and the remote)", "corrupt", found.returncode)
        return None

    def files(self, commit: str | None) -> list[str]:
        """Every file path in ``commit``'s tree."""
        if commit is None:
            return []
        return [p for p in self.run("ls-tree", "-r", "-z", "--name-only", commit).stdout.decode("utf-8").split("\0") if p]

    def hash_blob(self, data: bytes) -> str:
        return self.run("hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
