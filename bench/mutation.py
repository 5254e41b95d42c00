"""Benchmark of the tests themselves: mutation testing (cosmic-ray) of one or more modules.

Method: the committed tree (``git archive HEAD``) is unpacked in a temporary folder, where cosmic-ray
(``cosmic-ray init`` then ``exec``, local distributor) mutates each ``--module`` one mutant at a time.
The tests run against an *installed* cm, as the suite always does: the test command copies the
mutated file over the installed copy in ``--venv`` (a virtual environment holding cm installed from
this same commit, plus cosmic-ray, coverage and the test extras), removes that module's cached
bytecode (drains run with ``-I``, which ignores ``PYTHONDONTWRITEBYTECODE``, and a same-size mutant
copied within the same second would otherwise be read from a stale ``.pyc``), then runs pytest with
``-x``. A mutant counts as killed only when pytest reports a failing test (any other failure of the
command stops the run: the harness is broken); one that cosmic-ray's ``--mutant-timeout`` stops is
counted apart and left out of the score, one that cannot even be imported is counted apart
(incompetent). Score = killed / (killed + survived).

Which tests run (``--select``):
- ``coverage`` (default): a coverage map says which test executes which line of each module, in
  the test's own process *and* in every Python subprocess it starts (hooks, drains, ``cm flush``;
  ``bench/_mutation_cov.py`` names the coverage context after the test, also for subprocesses). It is
  built once from ``--tests`` (``--map FILE`` keeps it; ``--remap FILES`` refreshes those test files'
  entries). Each mutant then runs, fastest first (``--first FILES``: those files' tests before the
  rest, so a ``--max-tests`` cap keeps them), the tests that execute a line it changed; a
  change on a line that runs at import (module level, class bodies, signatures) runs every test
  that executes any line of the module. A test that never executes a line cannot notice its
  mutant, so this is the same verdict as running all of ``--tests``, at a fraction of the cost
  (except that a process killed by SIGKILL saves no coverage: its lines are credited to no test).
  Tests that fail on the unmutated code are left out and listed.
- ``all``: every test of ``--tests`` (minus ``--deselect``) for every mutant.

Mutants of ``|`` on a line where ``|`` appears only in parameter or return annotations are left
out (``from __future__ import annotations`` never evaluates them: every such mutant is equivalent);
field annotations stay in (pydantic evaluates them). Of the rest,
``--sample`` mutants per module are drawn with ``random.Random(--seed)`` (0 = all). ``--results``
keeps each sampled mutant's outcome; ``--survivors-of`` reruns only the survivors recorded there
(the same mutants, after new tests: a test added never un-kills a mutant) and reports the whole
sample with their new outcomes; ``--report-from`` prints a ``--results`` file's table again.
Run it under ``nice``: e.g. ``nice -n 15 python bench/mutation.py --venv .venv --module
writer_proc/commit.py --tests "tests/test_a.py tests/test_b.py" --map /tmp/map.json``.
"""

from __future__ import annotations

import argparse
import ast
import collections
import difflib
import glob
import json
import os
import random
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import ROOT, machine, write_section

BIT_OR = "core/ReplaceBinaryOperator_BitOr_"
PYTEST_FAILED = re.compile(r"\b\d+ (failed|errors?)\b")
NO_TEST = "no test executes"
CAPPED = "ran the fastest"


def _installed(venv: str, module: str) -> str:
    dotted = module.removesuffix(".py").replace("/", ".")
    dotted = dotted if dotted.startswith("cmrunner.") else "cmrunner." + dotted
    found = subprocess.run([os.path.join(venv, "bin", "python"), "-I", "-c",
                            f"import importlib.util; print(importlib.util.find_spec({dotted!r}).origin)"],
                           capture_output=True, text=True, cwd="/", check=True)
    return found.stdout.strip()


def _drop_bytecode(installed: str) -> None:
    cache = os.path.join(os.path.dirname(installed), "__pycache__")
    stem = os.path.basename(installed).removesuffix(".py") + "."
    for name in os.listdir(cache) if os.path.isdir(cache) else []:
        if name.startswith(stem):
            os.unlink(os.path.join(cache, name))


def _annotation_only_lines(source: str) -> set[int]:
    """Lines holding a ``|`` in a parameter or return annotation and no ``|`` evaluated at run time.

    Variable annotations are not counted: pydantic evaluates a model's field annotations."""
    tree = ast.parse(source)
    in_annotations: set[int] = set()  # ids of the BinOp nodes inside annotations
    for node in ast.walk(tree):
        notes = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            notes.append(node.returns)
        for note in notes:
            in_annotations.update(id(n) for n in ast.walk(note) if isinstance(n, ast.BinOp))
    bit_ors = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr)]
    evaluated = {n.lineno for n in bit_ors if id(n) not in in_annotations}
    return {n.lineno for n in bit_ors if id(n) in in_annotations} - evaluated


def _body_lines(source: str) -> set[int]:
    """Lines inside function bodies: they run when the function is called, not at import."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


# --- the coverage map -------------------------------------------------------------------------

def build_map(src: str, venv: str, modules: dict[str, str], tests: list[str], deselect: str, work: str) -> dict:
    """Run ``tests`` once under coverage; per module, which test executes which line."""
    data_file, times = os.path.join(work, "coverage.data"), os.path.join(work, "times.json")
    rc = os.path.join(work, "coveragerc")
    with open(rc, "w", encoding="utf-8") as handle:
        handle.write(f"[run]\nparallel = true\npatch = subprocess\ndata_file = {data_file}\n"
                     f"include =\n" + "".join(f"    {path}\n" for path in modules.values()))
    python = os.path.join(venv, "bin", "python")
    # The pytest script, not ``-m pytest``: ``-m`` would put the source tree's ``cmrunner/`` (no
    # ``writer_proc`` inside) ahead of the installed package on ``sys.path``.
    command = [python, "-m", "coverage", "run", f"--rcfile={rc}", os.path.join(venv, "bin", "pytest"), "-q",
               "-p", "no:cacheprovider",
               "-p", "_mutation_cov", *tests] + (["-k", "not " + deselect] if deselect else [])
    plugin = os.path.join(work, "plugin")  # alone on PYTHONPATH: bench/ holds mcp.py, import.py, ...
    os.makedirs(plugin, exist_ok=True)
    shutil.copyfile(os.path.join(src, "bench", "_mutation_cov.py"), os.path.join(plugin, "_mutation_cov.py"))
    env = dict(os.environ, PYTHONPATH=plugin, CM_MUTATION_TIMES=times)
    started = time.monotonic()
    code = subprocess.run(command, cwd=src, env=env).returncode
    if code not in (0, 1) or not os.path.exists(times):
        raise SystemExit(f"the coverage run did not run the tests (pytest exit {code}): no map")
    seconds = time.monotonic() - started
    subprocess.run([python, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=src, env=env, check=True)
    sys.path.insert(0, os.path.join(venv, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}",
                                    "site-packages"))
    import coverage  # the venv's; the harness itself does not depend on it otherwise

    data = coverage.CoverageData(basename=data_file)
    data.read()
    with open(times, encoding="utf-8") as handle:
        timing = json.load(handle)
    failed = sorted(node for node, row in timing.items() if not row["passed"])
    result: dict = {"tests": tests, "deselect": deselect, "seconds": round(seconds, 1), "failed": failed,
                    "durations": {node: row["seconds"] for node, row in timing.items()}, "lines": {}}
    for module, path in modules.items():
        by_line = data.contexts_by_lineno(path) if path in data.measured_files() else {}
        result["lines"][module] = {str(line): sorted({c for c in ctx if c and c not in failed})
                                   for line, ctx in by_line.items()}
    return result


def merge_map(old: dict, new: dict, refreshed: list[str]) -> dict:
    """``old`` with the entries of the ``refreshed`` test files replaced by ``new``'s."""
    def fresh(node: str) -> bool:
        return node.split("::")[0] in refreshed
    merged = {**old, "failed": sorted({n for n in old["failed"] if not fresh(n)} | set(new["failed"])),
              "durations": {**{n: s for n, s in old["durations"].items() if not fresh(n)}, **new["durations"]}}
    merged["lines"] = {}
    for module in set(old["lines"]) | set(new["lines"]):
        lines = collections.defaultdict(set)
        for line, nodes in old["lines"].get(module, {}).items():
            lines[line].update(n for n in nodes if not fresh(n))
        for line, nodes in new["lines"].get(module, {}).items():
            lines[line].update(nodes)
        merged["lines"][module] = {line: sorted(nodes) for line, nodes in lines.items()}
    return merged


def select_tests(mapping: dict, module: str, pristine: str, mutated: str,
                 first: tuple[str, ...] = ()) -> tuple[list[str], list[int]]:
    """The tests that execute a line the mutant changed, and those lines.

    Order: the tests of the ``first`` files (a module's own test files), then the rest; fastest
    first within each group, so a ``--max-tests`` cap never cuts the tests aimed at the module."""
    before, after = pristine.splitlines(), mutated.splitlines()
    changed: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    lines = mapping["lines"][module]
    if changed <= _body_lines(pristine):
        chosen = set().union(*(lines.get(str(line), []) for line in changed))
    else:
        chosen = set().union(*lines.values())
    durations = mapping["durations"]
    return sorted(chosen, key=lambda node: (node.split("::")[0] not in first, durations.get(node, 0.0), node)), \
        sorted(changed)


def run_mutant(args: argparse.Namespace) -> int:
    """cosmic-ray's test command: the mutated module is in the current directory."""
    with open(args.map, encoding="utf-8") as handle:
        mapping = json.load(handle)
    with open(args.pristine, encoding="utf-8") as handle:
        pristine = handle.read()
    with open(args.module[0], encoding="utf-8") as handle:
        mutated = handle.read()
    shutil.copyfile(args.module[0], args.installed)
    _drop_bytecode(args.installed)
    nodes, lines = select_tests(mapping, args.module[0], pristine, mutated, tuple(args.first.split()))
    if not nodes:
        print(f"{NO_TEST} line(s) {lines}")
        return 0
    if args.max_tests and len(nodes) > args.max_tests:
        print(f"{CAPPED} {args.max_tests} of the {len(nodes)} tests that execute line(s) {lines}", flush=True)
        nodes = nodes[:args.max_tests]
    else:
        print(f"{len(nodes)} test(s) execute line(s) {lines}", flush=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    pytest = os.path.join(args.venv, "bin", "pytest")
    return subprocess.run([pytest, "-x", "-q", "-p", "no:cacheprovider", f"--timeout={args.per_test_timeout}",
                           *nodes], env=env).returncode


# --- one module -------------------------------------------------------------------------------

def _sample(session: str, source: str, size: int, seed: int, only: set[tuple[str, int]] | None) -> tuple[int, int]:
    skip = _annotation_only_lines(source)
    conn = sqlite3.connect(session)
    try:
        # Ordered by what the mutant is, not by its random job id, so a seed draws the same mutants.
        specs = conn.execute("SELECT job_id, operator_name, occurrence, start_pos_row FROM mutation_specs"
                             " ORDER BY operator_name, occurrence").fetchall()
        pool = [job for job, op, _occ, row in specs if not (op.startswith(BIT_OR) and row in skip)]
        if only is not None:
            keep = {job for job, op, occ, _row in specs if (op, occ) in only}
        else:
            keep = set(random.Random(seed).sample(pool, min(size, len(pool)) if size else len(pool)))
        drop = [(job,) for job, *_rest in specs if job not in keep]
        conn.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
        conn.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
        conn.commit()
        return len(specs), len(pool)
    finally:
        conn.close()


def score_module(args: argparse.Namespace, src: str, work: str, module: str, installed: str,
                 only: set[tuple[str, int]] | None) -> dict:
    session = os.path.join(work, module.replace("/", "_") + ".sqlite")
    pristine = os.path.join(work, "pristine-" + os.path.basename(module))
    shutil.copyfile(os.path.join(src, module), pristine)
    me = os.path.join(src, "bench", "mutation.py")
    python = os.path.join(args.venv, "bin", "python")
    if args.select == "coverage":
        command = shlex.join([python, me, "--run-mutant", "--venv", args.venv, "--module", module, "--map", args.map,
                              "--pristine", pristine, "--installed", installed,
                              "--per-test-timeout", str(args.per_test_timeout), "--max-tests", str(args.max_tests),
                              "--first", args.first])
    else:
        deselect = ["-k", "not " + args.deselect] if args.deselect else []
        command = (f"cp {shlex.quote(module)} {shlex.quote(installed)} && "
                   f"rm -f {shlex.quote(os.path.dirname(installed))}/__pycache__/"
                   f"{shlex.quote(os.path.basename(installed).removesuffix('.py'))}.*.pyc && "
                   + shlex.join(["env", "PYTHONDONTWRITEBYTECODE=1", os.path.join(args.venv, "bin", "pytest"), "-x",
                                 "-q", "-p", "no:cacheprovider", f"--timeout={args.per_test_timeout}",
                                 *args.tests, *deselect]))
    config = os.path.join(work, "config.toml")
    with open(config, "w", encoding="utf-8") as handle:
        handle.write(f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {float(args.mutant_timeout)}\n'
                     f"excluded-modules = []\ntest-command = {sh_toml('sh -c ' + shlex.quote(command))}\n\n"
                     '[cosmic-ray.distributor]\nname = "local"\n')
    cosmic = os.path.join(args.venv, "bin", "cosmic-ray")
    subprocess.run([cosmic, "init", config, session], cwd=src, check=True, capture_output=True)
    with open(pristine, encoding="utf-8") as handle:
        total, pool = _sample(session, handle.read(), args.sample, args.seed, only)
    started = time.monotonic()
    try:
        subprocess.run([cosmic, "exec", config, session], cwd=src, check=True, capture_output=True)
    finally:  # the last mutant stays installed otherwise, and the next module's tests would meet it
        shutil.copyfile(pristine, installed)
        _drop_bytecode(installed)
    seconds = time.monotonic() - started
    conn = sqlite3.connect(session)
    rows = conn.execute("SELECT r.worker_outcome, r.test_outcome, s.operator_name, s.occurrence, s.start_pos_row,"
                        " r.output FROM work_results r JOIN mutation_specs s ON s.job_id = r.job_id"
                        " ORDER BY s.start_pos_row, s.operator_name").fetchall()
    conn.close()
    # A kill counts only when pytest itself reported a failing test: a test command that broke
    # before reaching the tests would otherwise score every mutant as killed.
    broken = [row for row in rows if row[1] == "KILLED" and row[0] != "TIMEOUT" and not PYTEST_FAILED.search(row[5] or "")]
    if broken:
        raise SystemExit(f"{module}: {len(broken)} mutant(s) 'killed' without a failing test; the harness is broken:\n"
                         + (broken[0][5] or "")[-800:])
    mutants = [{"operator": op, "occurrence": occ, "line": row,  # cosmic-ray's rows count from 1
                "outcome": "timeout" if worker == "TIMEOUT" else (test or worker).lower(),
                "untested": NO_TEST in (output or ""), "capped": CAPPED in (output or "")}
               for worker, test, op, occ, row, output in rows]
    return {"module": module, "total": total, "pool": pool, "seconds": round(seconds), "mutants": mutants}


def _row(result: dict, label: str) -> str:
    outcome = collections.Counter(m["outcome"] for m in result["mutants"])
    killed, survived = outcome["killed"], outcome["survived"]
    return (f"| `{result['module']}` | {label} | {result['total']} | {result['pool']} | {len(result['mutants'])} | "
            f"{killed} | {survived} | {outcome['timeout']} | {outcome['incompetent']} | "
            f"**{100 * killed / max(1, killed + survived):.0f}%** | {result['seconds']} s |")


def report(results: list[dict], args: argparse.Namespace, cosmic: str) -> str:
    files = " ".join(args.tests) if len(args.tests) <= 3 else f"{len(args.tests)} test files"
    method = (f"per mutant, the tests that execute a changed line (coverage map of {files}"
              f"{f', without -k {args.deselect}' if args.deselect else ''})" if args.select == "coverage"
              else f"every test of {files}")
    lines = [f"Machine: {machine()}; cosmic-ray {version(cosmic)}; label: {args.label}; sample {args.sample or 'all'}"
             f" per module, seed {args.seed}{', only the survivors of ' + os.path.basename(args.survivors_of) if args.survivors_of else ''};"
             f" tests: {method}; pytest -x, {args.per_test_timeout} s per test, {args.mutant_timeout} s per mutant"
             f"{f', at most {args.max_tests} tests per mutant (fastest first)' if args.max_tests else ''}"
             f"{f', the tests of {args.first} first' if args.first else ''}.", "",
             "| module | run | mutants | outside annotations | run | killed | survived | timeout | incompetent | score | time |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [_row(result, args.label) for result in results]
    lines.append("")
    for result in results:
        survivors = [f"line {m['line']} {m['operator'].removeprefix('core/')}#{m['occurrence']}"
                     + (" (no test executes it)" if m["untested"] else "")
                     + (f" (only the {args.max_tests} fastest of its tests ran)" if m.get("capped") else "")
                     for m in result["mutants"] if m["outcome"] == "survived"]
        lines.append(f"Survivors in `{result['module']}`: " + ("; ".join(survivors) or "none") + ".")
        lines.append("")
    return "\n".join(lines)


def coverage_summary(mapping: dict, module: str) -> str:
    """Which test files (and how many of their tests) execute ``module``, and its lines no test runs."""
    nodes = set().union(*mapping["lines"][module].values()) if mapping["lines"][module] else set()
    files = collections.Counter(node.split("::")[0] for node in nodes)
    seconds = sum(mapping["durations"].get(node, 0.0) for node in nodes)
    return (f"`{module}`: {len(nodes)} tests in {len(files)} files ({seconds:.0f} s in the map run): "
            + ", ".join(f"{path.removeprefix('tests/')} ({count})" for path, count in sorted(files.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Method and options: see the module docstring (bench/mutation.py).")
    parser.add_argument("--venv", required=True, help="a venv with cm (this commit, not editable), cosmic-ray, coverage, test extras")
    parser.add_argument("--module", action="append", help="a module to mutate, e.g. writer_proc/jobs.py (repeatable)")
    parser.add_argument("--tests", default="tests/test_writer.py tests/test_session_scopes.py",
                        help="the test files (space-separated; globs allowed)")
    parser.add_argument("--deselect", default="", help="pytest -k expression of tests to leave out")
    parser.add_argument("--select", choices=("coverage", "all"), default="coverage",
                        help="per mutant: the tests executing a changed line (default), or all --tests")
    parser.add_argument("--map", help="coverage map file (JSON): read if it exists, else built and kept")
    parser.add_argument("--remap", default="", help="test files whose map entries are rebuilt (after adding tests)")
    parser.add_argument("--map-only", action="store_true", help="build the map, print which tests execute each module, stop")
    parser.add_argument("--sample", type=int, default=60, help="mutants per module (0 = all)")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--survivors-of", help="a --results file: rerun only its survivors")
    parser.add_argument("--results", help="write every mutant's outcome to this JSON file")
    parser.add_argument("--per-test-timeout", type=int, default=120)
    parser.add_argument("--max-tests", type=int, default=0,
                        help="with --select coverage: run at most this many of a mutant's covering tests, fastest first (0 = all)")
    parser.add_argument("--first", default="",
                        help="with --select coverage: test files whose tests run before the others (space-separated)")
    parser.add_argument("--mutant-timeout", type=int, default=1200, help="cosmic-ray's timeout per mutant (s)")
    parser.add_argument("--label", default="run")
    parser.add_argument("--report-from", metavar="RESULTS", help="print (and --write) the table of a --results file; run nothing")
    parser.add_argument("--write", metavar="SECTION", help="write the table to docs/benchmarks.md's bench:SECTION block")
    parser.add_argument("--run-mutant", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pristine", help=argparse.SUPPRESS)
    parser.add_argument("--installed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.module = args.module or ["writer_proc/jobs.py"]
    args.venv = os.path.abspath(args.venv)
    if args.run_mutant:
        raise SystemExit(run_mutant(args))
    if args.report_from:
        args.tests = args.tests.split()
        with open(args.report_from, encoding="utf-8") as handle:
            results = json.load(handle)
        body = report(results, args, os.path.join(args.venv, "bin", "cosmic-ray"))
        print(body)
        if args.write:
            write_section(args.write, body)
        return
    args.tests = sorted({path for pattern in args.tests.split() for path in glob.glob(pattern, root_dir=ROOT)})
    work = tempfile.mkdtemp(prefix="cm-mutation-")
    src = os.path.join(work, "src")
    os.mkdir(src)
    archive = subprocess.run(["git", "-C", ROOT, "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    installed = {module: _installed(args.venv, module) for module in args.module}
    originals = {}
    for module, path in installed.items():
        with open(path, "rb") as a, open(os.path.join(src, module), "rb") as b:
            originals[module] = a.read()
            if originals[module] != b.read():
                raise SystemExit(f"{path} is not {module} of HEAD: install this commit into --venv first")
        _drop_bytecode(path)
    survivors_of, before = None, {}
    if args.survivors_of:
        with open(args.survivors_of, encoding="utf-8") as handle:
            before = {r["module"]: r for r in json.load(handle)}
        survivors_of = {module: {(m["operator"], m["occurrence"]) for m in r["mutants"] if m["outcome"] == "survived"}
                        for module, r in before.items()}
    results = []
    try:
        if args.select == "coverage":
            args.map = os.path.abspath(args.map or os.path.join(work, "map.json"))
            remap = args.remap.split()
            if not os.path.exists(args.map) or remap:
                fresh = build_map(src, args.venv, installed, remap or args.tests, args.deselect, work)
                if remap:
                    with open(args.map, encoding="utf-8") as handle:
                        fresh = merge_map(json.load(handle), fresh, remap)
                with open(args.map, "w", encoding="utf-8") as handle:
                    json.dump(fresh, handle)
            with open(args.map, encoding="utf-8") as handle:
                mapping = json.load(handle)
            missing = [m for m in args.module if m not in mapping["lines"]]
            if missing:
                raise SystemExit(f"the map has no entry for {missing}: rebuild it with these modules")
            print(f"map: {len(mapping['durations'])} tests, {len(mapping['failed'])} failing and left out"
                  f"{': ' + ', '.join(mapping['failed']) if mapping['failed'] else ''}", flush=True)
            if args.map_only:
                for module in args.module:
                    print(coverage_summary(mapping, module))
                return
        else:
            deselect = ["-k", "not " + args.deselect] if args.deselect else []
            if subprocess.run([os.path.join(args.venv, "bin", "pytest"), "-x", "-q", "-p", "no:cacheprovider",
                               *args.tests, *deselect], cwd=src, capture_output=True).returncode != 0:
                raise SystemExit("the unmutated tests fail: no score")
        for module in args.module:
            only = None if survivors_of is None else survivors_of.get(module, set())
            result = score_module(args, src, work, module, installed[module], only)
            if module in before:  # the earlier run's mutants, with the survivors' new outcomes
                rerun = {(m["operator"], m["occurrence"]): m for m in result["mutants"]}
                result["mutants"] = [rerun.get((m["operator"], m["occurrence"]), m) for m in before[module]["mutants"]]
            results.append(result)
            print(_row(results[-1], args.label), flush=True)
            if args.results:  # after each module, so an interrupted run keeps what it measured
                with open(args.results, "w", encoding="utf-8") as handle:
                    json.dump(results, handle, indent=1)
    finally:
        for module, path in installed.items():
            with open(path, "wb") as handle:
                handle.write(originals[module])
            _drop_bytecode(path)
        shutil.rmtree(work, ignore_errors=True)
    body = report(results, args, os.path.join(args.venv, "bin", "cosmic-ray"))
    print(body)
    if args.write:
        write_section(args.write, body)


def sh_toml(text: str) -> str:
    """``text`` as a TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def version(cosmic: str) -> str:
    return subprocess.run([cosmic, "--version"], capture_output=True, text=True).stdout.split()[-1]


if __name__ == "__main__":
    main()
