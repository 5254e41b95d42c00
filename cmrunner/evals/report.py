"""The report of a ``cm eval`` run: its typed model, its JSON and its Markdown.

Contract:
- ``Report`` is the ``--json`` output (``model_dump(by_alias=True)``), and ``json_schema()`` the
  schema committed as ``report.schema.json``.
- Scoring: a world *passed* when every deterministic check passed, *failed* otherwise, *not_run*
  when its work could not finish (the code says why). ``score.percent`` is passed worlds over
  worlds that ran (``null`` when none ran). Per class, ``checks``/``passed`` count the checks of that
  class over the worlds that ran, and ``status`` is ``failed`` when any of them failed,
  ``not_run`` when none ran, else ``passed``. ``failedClasses`` lists the failed ones.
  Judge verdicts are listed apart and never counted.
- Cost: the sum of the ledgers of the worlds that ran, and that sum per user turn (``null`` when no
  world that ran opened a store).
- ``markdown(report)`` renders the same facts for people; every failed check carries its quote.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cmrunner.evals import cost as cost_mod
from cmrunner.evals.world import CLASSES, VIOLATIONS

Status = Literal["passed", "failed", "not_run"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CheckResult(_Model):
    kind: str
    class_: str = Field(alias="class")
    passed: bool
    detail: str
    quote: str | None = None


class JudgeResult(_Model):
    class_: str = Field(alias="class")
    question: str
    verdict: Literal["PASS", "FAIL", "ERROR"]
    reason: str


class Cost(_Model):
    """Ledger totals (``core/ledger.py:totals``): counts, and seconds spent in requests."""
    requests: int = 0
    bytesSent: int = 0
    bytesReceived: int = 0
    inputTokens: int = 0
    outputTokens: int = 0
    tokens: int = 0
    estimatedRequests: int = 0
    seconds: float = 0


class WorldResult(_Model):
    id: str
    title: str
    classes: list[str]
    status: Status
    code: str | None = None
    message: str | None = None
    userTurns: int
    seconds: float
    checks: list[CheckResult] = []
    judge: list[JudgeResult] = []
    cost: Cost | None = None


class ClassResult(_Model):
    class_: str = Field(alias="class")
    violation: bool
    worlds: int
    checks: int
    passed: int
    status: Status


class Score(_Model):
    worlds: int
    passed: int
    failed: int
    notRun: int
    percent: float | None


class ModelInfo(_Model):
    label: str
    synthetic: bool
    policy: str | None
    model: str | None
    baseUrl: str | None
    api: str


class Spend(_Model):
    total: Cost
    perUserTurn: dict[str, float]  # the keys of Cost, each divided by userTurns
    userTurns: int


class Report(_Model):
    version: Literal[1] = 1
    model: ModelInfo
    judge: str | None
    startedAt: str
    seconds: float
    score: Score
    failedClasses: list[str]
    classes: list[ClassResult]
    worlds: list[WorldResult]
    cost: Spend | None


def build(worlds: list[WorldResult], model: dict, judge: str | None, started: str, seconds: float) -> Report:
    ran = [w for w in worlds if w.status != "not_run"]
    passed = sum(w.status == "passed" for w in worlds)
    classes = []
    for name in CLASSES:
        tested = [w for w in worlds if name in w.classes]
        if not tested:
            continue
        counted = [c for w in tested if w.status != "not_run" for c in w.checks if c.class_ == name]
        ok = sum(c.passed for c in counted)
        status: Status = "not_run" if not counted else ("passed" if ok == len(counted) else "failed")
        classes.append(ClassResult(**{"class": name}, violation=name in VIOLATIONS, worlds=len(tested),
                                   checks=len(counted), passed=ok, status=status))
    spend = None
    costed = [w for w in ran if w.cost is not None]
    if costed:
        total: dict = {}
        for w in costed:
            total = cost_mod.add(total, w.cost.model_dump() if w.cost else {})
        turns = sum(w.userTurns for w in costed)
        spend = Spend(total=Cost(**total), perUserTurn=cost_mod.per_turn(total, turns), userTurns=turns)
    return Report(model=ModelInfo(**model), judge=judge, startedAt=started, seconds=seconds,
                  score=Score(worlds=len(worlds), passed=passed, failed=sum(w.status == "failed" for w in worlds),
                              notRun=len(worlds) - len(ran),
                              percent=round(100 * passed / len(ran), 1) if ran else None),
                  failedClasses=[c.class_ for c in classes if c.status == "failed"], classes=classes, worlds=worlds,
                  cost=spend)


def json_schema() -> dict:
    schema = Report.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cm eval report"
    return schema


def _cost_line(c: dict) -> str:
    return (f"{c['requests']:g} requests, {c['tokens']:,.0f} tokens ({c['inputTokens']:,.0f} in / "
            f"{c['outputTokens']:,.0f} out), {c['bytesSent']:,.0f} bytes sent / {c['bytesReceived']:,.0f} received, "
            f"{c['seconds']:g} s")


def markdown(report: Report) -> str:
    score = report.score
    percent = f"{score.percent:g}%" if score.percent is not None else "n/a"
    lines = [f"# cm eval: {report.model.label}", "",
             f"Score: **{percent}** — {score.passed} of {score.worlds - score.notRun} worlds passed"
             + (f", {score.notRun} not run" if score.notRun else "") + f" ({report.seconds:g} s).",
             "Failed classes: " + (", ".join(report.failedClasses) or "none") + ".", "",
             "| class | kind | worlds | checks passed | result |", "|---|---|---:|---:|---|"]
    for row in report.classes:
        lines.append(f"| {row.class_} | {'violation' if row.violation else 'capability'} | {row.worlds} | "
                     f"{row.passed}/{row.checks} | {row.status} |")
    lines += ["", "| world | classes | result | user turns | model requests | seconds |", "|---|---|---|---:|---:|---:|"]
    for w in report.worlds:
        result = w.status if w.status != "not_run" else f"not run ({w.code})"
        requests = w.cost.requests if w.cost is not None else "—"
        lines.append(f"| {w.id} | {', '.join(w.classes)} | {result} | {w.userTurns} | {requests} | {w.seconds:g} |")
    failures = [(w, c) for w in report.worlds for c in w.checks if not c.passed]
    if failures:
        lines += ["", "## Failed checks", ""]
        for w, c in failures:
            lines.append(f"- **{w.id}** ({c.class_}, {c.kind}): {c.detail}" + (f"  \n  > {c.quote}" if c.quote else ""))
    skipped = [w for w in report.worlds if w.status == "not_run"]
    if skipped:
        lines += ["", "## Not run", ""] + [f"- **{w.id}**: {w.code}: {w.message}" for w in skipped]
    verdicts = [(w, j) for w in report.worlds for j in w.judge]
    if verdicts:
        lines += ["", f"## Judge ({report.judge}; not part of the score)", ""]
        lines += [f"- **{w.id}** ({j.class_}): {j.verdict}: {j.question} — {j.reason}" for w, j in verdicts]
    lines += [""]
    if report.cost is not None:
        lines += [f"Cost: {_cost_line(report.cost.total.model_dump())} over {report.cost.userTurns} user turns; "
                  f"per user turn {_cost_line(report.cost.perUserTurn)}."]
    else:
        lines += ["Cost: not measured (no world recorded any request)."]
    return "\n".join(lines) + "\n"
