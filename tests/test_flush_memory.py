"""Bounded memory per ``cm flush``, whatever a provider sends (issue 22).

A provider that answers every request with an 80 MiB stream — small text deltas, or one 80 MiB
``data:`` line that never ends — against a 3 s whole-attempt deadline: one real ``cm flush``
makes five attempts (1 + 2 + 4 + 8 s of backoff fit its wait bound) and its peak RSS, the child's
own ``ru_maxrss``, stays within 100 MiB across all of them. Before, the first
failed request loaded the token estimator's tables (the ``bpe-openai`` package decodes three
encodings into Python at import) and the flush peaked at 186–188 MiB. Figures and method:
``bench/flush_memory.py`` and ``docs/benchmarks.md``. Both floods run at once (two servers, two
homes, two flushes), so the test costs one flush's backoffs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from agent_support import configure_remote
from conftest import CM, hook_env
from writer_support import admit, rows

from cmrunner.synthetic import fakemodel

STREAM = 80 * 1024 * 1024
PEAK_MIB = 100
CASES = {"text deltas": {"text": "x", "flood": STREAM}, "one line": {"text": "x", "line": STREAM}}
# Linux keeps a process's peak RSS across execve, so a child forked straight from this pytest process
# (hundreds of MiB deep into the suite) would report pytest's peak as its own. A small launcher forks
# the flush instead and reports that child's ``ru_maxrss`` from ``os.wait4``.
LAUNCHER = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[2:])\n"
    "_pid, status, usage = os.wait4(proc.pid, 0)\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')\n"
)
ATTEMPTS = 5  # the first attempt and the four whose backoff (1, 2, 4, 8 s) fits the flush's 10 s wait bound


def _flush(workdir: str, reply: dict, found: dict) -> None:
    home = os.path.join(workdir, "home")
    with fakemodel.running(os.path.join(workdir, "fm"), {"replies": [], "default": reply}, lifetime_seconds=240) as fm:
        paths, _ = configure_remote(home, fm.base_url, deadlineMs=3000)
        admit(paths, "I prefer tabs over spaces in Go.", "e1")
        with open(os.path.join(workdir, "out"), "wb") as out, open(os.path.join(workdir, "err"), "wb") as err:
            peak_file = os.path.join(workdir, "peak")
            proc = subprocess.Popen([sys.executable, "-I", "-c", LAUNCHER, peak_file, CM, "flush"],
                                    env=hook_env(COMMON_MEMORY_HOME=home), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
            guard = threading.Timer(180, os.killpg, (proc.pid, 9))  # a hung flush fails the test instead of hanging it
            guard.start()
            try:
                proc.wait()
            finally:
                guard.cancel()
        assert proc.returncode == 0, "the launcher reported the flush"
        rc, maxrss_kib = (int(x) for x in open(peak_file, encoding="utf-8").read().split())
        found.update(rc=rc, peak_mib=maxrss_kib / 1024, paths=paths,
                     requests=len(fm.model_requests()),
                     out=open(os.path.join(workdir, "out"), encoding="utf-8").read(),
                     err=open(os.path.join(workdir, "err"), encoding="utf-8").read())


def test_a_flooding_provider_keeps_one_flush_within_100_mib_across_all_attempts(tmp_path):
    results: dict[str, dict] = {case: {} for case in CASES}
    threads = [threading.Thread(target=_flush, args=(str(tmp_path / str(i)), reply, results[case]))
               for i, (case, reply) in enumerate(CASES.items())]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for case, found in results.items():
        assert found, f"{case}: the flush did not run"
        assert found["rc"] == 1 and "Traceback" not in found["err"], (case, found["err"])
        attempts = rows(found["paths"], "SELECT attempts FROM jobs")[0][0]
        assert attempts == ATTEMPTS == found["requests"], (case, attempts, found["requests"])
        assert found["out"].count("retry (INVALID_RESPONSE)") == ATTEMPTS, (case, found["out"])
        ledger = rows(found["paths"], "SELECT response_bytes, outcome FROM ledger")
        assert len(ledger) == ATTEMPTS and all(o == "INVALID_RESPONSE" and b > 1 << 20 for b, o in ledger), ledger
        assert found["peak_mib"] <= PEAK_MIB, f"{case}: cm flush peaked at {found['peak_mib']:.0f} MiB"


def test_the_estimator_counts_o200k_without_loading_the_package():
    """The backend alone gives the package's ``encode_ordinary`` counts (measured with it: 9, 8, 12,
    16), and the package's ``__init__`` (three encodings decoded into Python) never runs."""
    script = (
        "import sys\n"
        "from cmrunner.agentrt import tokencount\n"
        "texts = ['hello <|endoftext|> world', 'I prefer tabs over spaces in Go.', '我更喜欢在 Go 里用制表符。',\n"
        "         '{\"a\":[1,2,3],\"b\":\"ünïcödé\"}']\n"
        "print([tokencount.estimate(t.encode()) for t in texts])\n"
        "print('bpe_openai' in sys.modules, tokencount.rough(b'x' * 9))\n"
    )
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    counts, rest = proc.stdout.splitlines()
    assert counts == str([(9, "o200k_base"), (8, "o200k_base"), (12, "o200k_base"), (16, "o200k_base")])
    assert rest == "False (3, 'bytes/4')"
