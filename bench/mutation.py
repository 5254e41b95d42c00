"""Benchmark of the tests themselves: a mutation-testing run (cosmic-ray) on one module, a seeded sample.

Method: the committed tree (``git archive HEAD``) is unpacked in a temporary folder, where cosmic-ray
(``cosmic-ray init`` then ``exec``, local distributor) mutates ``--module`` one mutant at a time. The
tests run against an *installed* cm, as the suite always does, so the test command first copies the
mutated file over the installed copy in ``--venv`` (a virtual environment holding cm installed from
this same commit, plus cosmic-ray and the test extras; bytecode writing is off so no stale ``.pyc``
is read), then runs ``pytest -x`` on ``--tests``; a mutant counts as killed only when pytest reports a
failing test (any other failure of the command stops the run: the harness is broken). Mutants of ``|`` are left out: in these modules it
appears only in type annotations, which ``from __future__ import annotations`` never evaluates, so
every such mutant is equivalent. Of the rest, ``--sample`` mutants are drawn with
``random.Random(--seed)``. Score = killed / (killed + survived); a mutant that times out counts as
killed, one that cannot even be imported is counted apart (incompetent). The unmutated tests must
pass first. The installed copy is restored at the end.
Usage: ``python bench/mutation.py --venv V [--module writer_proc/jobs.py] [--tests "..."] [--sample 60]
[--seed 28] [--write]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import ROOT, machine, write_section

ANNOTATION_ONLY = "core/ReplaceBinaryOperator_BitOr_"
PYTEST_FAILED = re.compile(r"\b\d+ (failed|errors?)\b")


def _installed(venv: str, module: str) -> str:
    dotted = module.removesuffix(".py").replace("/", ".")
    dotted = dotted if dotted.startswith("cmrunner.") else "cmrunner." + dotted
    found = subprocess.run([os.path.join(venv, "bin", "python"), "-I", "-c",
                            f"import importlib.util; print(importlib.util.find_spec({dotted!r}).origin)"],
                           capture_output=True, text=True, cwd="/", check=True)
    return found.stdout.strip()


def _sample(session: str, size: int, seed: int) -> tuple[int, int]:
    conn = sqlite3.connect(session)
    try:
        specs = conn.execute("SELECT job_id, operator_name FROM mutation_specs ORDER BY job_id").fetchall()
        pool = [job for job, operator in specs if not operator.startswith(ANNOTATION_ONLY)]
        keep = set(random.Random(seed).sample(pool, min(size, len(pool))))
        drop = [(job,) for job, _operator in specs if job not in keep]
        conn.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
        conn.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
        conn.commit()
        return len(specs), len(pool)
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True, help="a venv with cm (this commit, not editable), cosmic-ray, test extras")
    parser.add_argument("--module", default="writer_proc/jobs.py")
    parser.add_argument("--tests", default="tests/test_writer.py tests/test_session_scopes.py")
    parser.add_argument("--deselect", default="mid_session", help="pytest -k expression to leave out (slow e2e)")
    parser.add_argument("--sample", type=int, default=60)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cm-mutation-")
    src, session = os.path.join(work, "src"), os.path.join(work, "session.sqlite")
    os.mkdir(src)
    archive = subprocess.run(["git", "-C", ROOT, "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    installed = _installed(args.venv, args.module)
    with open(installed, "rb") as a, open(os.path.join(src, args.module), "rb") as b:
        if a.read() != b.read():
            raise SystemExit(f"{installed} is not {args.module} of HEAD: install this commit into --venv first")
    original = open(installed, "rb").read()
    for name in os.listdir(os.path.join(os.path.dirname(installed), "__pycache__")):
        if name.startswith(os.path.basename(installed).removesuffix(".py") + "."):
            os.unlink(os.path.join(os.path.dirname(installed), "__pycache__", name))
    deselect = f" -k {shlex.quote('not ' + args.deselect)}" if args.deselect else ""
    command = (f"cp {shlex.quote(args.module)} {shlex.quote(installed)} && PYTHONDONTWRITEBYTECODE=1 "
               f"{shlex.quote(os.path.join(args.venv, 'bin', 'pytest'))} -x -q -p no:cacheprovider {args.tests}{deselect}")
    config = os.path.join(work, "config.toml")
    with open(config, "w", encoding="utf-8") as handle:
        handle.write(f'[cosmic-ray]\nmodule-path = "{args.module}"\ntimeout = 300.0\nexcluded-modules = []\n'
                     f"test-command = {sh_toml('sh -c ' + shlex.quote(command))}\n\n[cosmic-ray.distributor]\nname = \"local\"\n")
    cosmic = os.path.join(args.venv, "bin", "cosmic-ray")
    try:
        if subprocess.run(["sh", "-c", command], cwd=src, capture_output=True).returncode != 0:
            raise SystemExit("the unmutated tests fail: no score")
        subprocess.run([cosmic, "init", config, session], cwd=src, check=True, capture_output=True)
        total, pool = _sample(session, args.sample, args.seed)
        subprocess.run([cosmic, "exec", config, session], cwd=src, check=True, capture_output=True)
        conn = sqlite3.connect(session)
        rows = conn.execute("SELECT r.worker_outcome, r.test_outcome, s.operator_name, s.start_pos_row, r.output"
                            " FROM work_results r JOIN mutation_specs s ON s.job_id = r.job_id"
                            " ORDER BY s.start_pos_row").fetchall()
        conn.close()
        # A kill counts only when pytest itself reported a failing test: a test command that broke
        # before reaching the tests would otherwise score every mutant as killed.
        broken = [row for row in rows if row[1] == "KILLED" and not PYTEST_FAILED.search(row[4] or "")]
        if broken:
            raise SystemExit(f"{len(broken)} mutant(s) 'killed' without a failing test; the harness is broken:\n"
                             + (broken[0][4] or "")[-800:])
    finally:
        with open(installed, "wb") as handle:
            handle.write(original)
        shutil.rmtree(work, ignore_errors=True)
    outcome = collections.Counter("timeout" if worker == "TIMEOUT" else (test or worker).lower()
                                  for worker, test, _op, _row, _output in rows)
    killed, survived = outcome["killed"] + outcome["timeout"], outcome["survived"]
    survivors = [f"line {row + 1} {op.removeprefix('core/')}" for _w, test, op, row, _o in rows if test == "SURVIVED"]
    body = "\n".join([
        f"Machine: {machine()}; cosmic-ray {version(cosmic)}; `{args.module}`; tests: `{args.tests}`"
        f"{f' (without -k {args.deselect})' if args.deselect else ''}.", "",
        "| mutants in the module | outside annotations | sampled (seed) | killed | survived | timeout | incompetent | score |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
        f"| {total} | {pool} | {len(rows)} ({args.seed}) | {outcome['killed']} | {survived} | {outcome['timeout']} | "
        f"{outcome['incompetent']} | **{100 * killed / max(1, killed + survived):.0f}%** |", "",
        "Survivors: " + ("; ".join(survivors) or "none") + ".",
    ])
    print(body)
    if args.write:
        write_section("mutation", body)


def sh_toml(text: str) -> str:
    """``text`` as a TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def version(cosmic: str) -> str:
    return subprocess.run([cosmic, "--version"], capture_output=True, text=True).stdout.split()[-1]


if __name__ == "__main__":
    main()
