"""Every rule the Writer enforces on a submission is still taught to the model (issue 35).

The instructions were cut from 3.7 KB to 2.1 KB. The Writer enforces every rule whatever the text
says, but a rule the model is never told costs a rejected submission and a retry on every job
that meets it. ``cm eval``'s synthetic policies do not read the instructions, so they cannot show a
lost rule; this guard can: each code a submission can be rejected with must be mapped to the words
that teach it, and those words must be in what the model receives — the instructions, the decision
schema, or (for the rule only an edit task uses) the task. A code with no mapping fails the test,
so a new rule arrives with its teaching or with a stated reason why its data teaches it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmrunner.agentrt.agent import system_prompt
from cmrunner.writer_proc import contract, port

WRITER = Path(contract.__file__).parent
SECTIONS = Path(contract.__file__).parents[1] / "core" / "sections.py"

# code -> words the instructions (or the schema, or the edit task) hold that teach the rule
TAUGHT: dict[str, str] = {
    "INVALID_DECISION": "fields a kind or op does not use are null",
    "INVALID_REQUEST_REFERENCE": "with the task's `request_id`",
    "INCOMPLETE_INGEST_COVERAGE": "Read all",
    "UNREAD_MEMORY_TARGET": "edit only documents read to the end",
    "INVALID_EVIDENCE_REFERENCE": "`evidence_ref` of current sources",
    "MISSING_EVIDENCE": "`retain`/`forget` cite one",
    "UNAUTHORIZED_SCOPE": "`applicability` `global` writes only `profile`",
    "DUPLICATE_SECTION_OPERATION": "Each section once",
    "DUPLICATE_SECTION_TITLE": "unique titles",
    "INVALID_SECTION_TITLE": "one-line `title`",
    "INVALID_SECTION_BODY": "`body` without `#`/`##` headings",
    "INVALID_TARGET_REFERENCE": "`section` null appends, a ref replaces",
    "DOCUMENT_TOO_LARGE": "over the hard one, all is rejected",
    "UNAUTHORIZED_FORGET_EVIDENCE": "never alone forget",
    "UNAUTHORIZED_IMPORT_OVERWRITE": "remove or replace what the person said",
    "IMPORT_KIND_WRONG_TARGET": "only into `may_become`",
    "IMPORT_INSTRUCTION_IN_PROFILE": "From an import `profile` takes facts only",
    "SENSITIVE_CONTENT_REJECTED": "Never store secrets",
    "STALE_SOURCE": "On change replace or correct the section",
    "INVALID_EDIT_RESULT": port.EDIT_RESULT_RULE,
}
# code -> why the model learns it from what it reads rather than from the instructions
TAUGHT_BY_DATA: dict[str, str] = {
    "UNAUTHORIZED_WRITE": "the manifest marks each document `writable`",
    "UNSAFE_CHARACTER": "only a model emitting control characters meets it; the rejection's fixed hint names them",
    "INVALID_DOCUMENT": "a document cm cannot parse is listed as `blocked`, which the instructions cover",
    "INVALID_BUDGET": "budgets come from the manifest's own `soft_budget_bytes` / `hard_budget_bytes`",
}


def _enforced_codes() -> set[str]:
    """The codes a submission can be rejected with: the decision contract's, the renderer's and the
    section model's (which the renderer turns into rejections)."""
    raised = re.compile(r'(?:_reject|DecisionRejected|CmError)\(\s*"([A-Z][A-Z0-9_]+)"')
    codes: set[str] = set()
    for path in (WRITER / "contract.py", WRITER / "apply.py", SECTIONS):
        codes |= set(raised.findall(path.read_text(encoding="utf-8")))
    return codes


def _what_the_model_receives() -> str:
    schema = json.dumps(contract.decision_json_schema(True), ensure_ascii=False)
    return "\n".join((system_prompt(), schema, port.EDIT_RESULT_RULE))


def test_every_enforced_code_is_mapped_to_its_teaching():
    codes = _enforced_codes()
    assert len(codes) >= 15, f"the scan found too few codes to be looking at the Writer: {sorted(codes)}"
    unmapped = codes - set(TAUGHT) - set(TAUGHT_BY_DATA)
    assert not unmapped, f"rules the Writer enforces that nothing teaches: {sorted(unmapped)}"
    assert not (set(TAUGHT) | set(TAUGHT_BY_DATA)) - codes, "a mapping for a code the Writer no longer raises"


@pytest.mark.parametrize("code", sorted(TAUGHT))
def test_the_words_that_teach_each_rule_reach_the_model(code):
    assert TAUGHT[code] in _what_the_model_receives(), f"{code}: its teaching was cut"
