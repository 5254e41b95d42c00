"""One owner per table: the SQL that reads or writes a table is written in exactly one module.

A source scan of the production tree (cmrunner/, hooks/, writer_proc/, bridge/): any string that
names a table after FROM, INTO, UPDATE, JOIN or TABLE counts as SQL against it. Every table the
migrations create must be in OWNERS, its owner must really hold its SQL, and no other module may.
The migrations module creates and reshapes every table, so it is the one exception.
"""

from __future__ import annotations

import ast
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS = "cmrunner/core/migrations.py"

# table -> the module that owns its SQL (a repository per area; callers use its functions).
OWNERS = {
    "schema_migrations": MIGRATIONS,
    # capture: inboxes, admission, sessions
    "admitted_events": "cmrunner/capture/admission.py",
    "codex_inbox": "cmrunner/capture/codex_inbox.py",
    "codex_candidates": "cmrunner/capture/codex_inbox.py",
    "codex_cursors": "cmrunner/capture/codex_inbox.py",
    "codex_progress": "cmrunner/capture/codex_inbox.py",
    "codex_watches": "cmrunner/capture/codex_inbox.py",
    "codex_failures": "cmrunner/capture/failures.py",
    "pi_inbox": "cmrunner/capture/pi_inbox.py",
    "pi_inputs": "cmrunner/capture/pi_inbox.py",
    "hook_inbox": "cmrunner/capture/hook_inbox.py",
    "hook_rejections": "cmrunner/capture/hook_rejections.py",
    "sessions": "cmrunner/capture/sessions.py",
    "session_batches": "cmrunner/capture/sessions.py",
    "session_messages": "cmrunner/capture/sessions.py",
    "session_turns": "cmrunner/capture/sessions.py",
    "host_activations": "cmrunner/capture/activations.py",
    "host_snapshots": "cmrunner/capture/activations.py",
    # observations and what forgetting leaves behind
    "observations": "cmrunner/capture/observations.py",
    "forgotten_sources": "cmrunner/capture/observations.py",
    "cancellations": "cmrunner/capture/observations.py",
    "import_sections": "cmrunner/capture/importsections.py",
    # the job queue, its flags, and the drain's lease and failure records
    "jobs": "cmrunner/core/jobstore.py",
    "settings": "cmrunner/core/jobstore.py",
    "drain_lease": "cmrunner/core/drainlease.py",
    "drain_failures": "cmrunner/core/drainfailures.py",
    # what the Writer commits: receipts, links, document versions, correction watermarks (in core:
    # MCP item status reads the links, and MCP may not import the Writer's room)
    "receipts": "cmrunner/core/records.py",
    "associations": "cmrunner/core/records.py",
    "document_versions": "cmrunner/core/records.py",
    "correction_watermarks": "cmrunner/core/records.py",
    # section history and the trash
    "section_versions": "cmrunner/core/history.py",
    "trash": "cmrunner/core/history.py",
    "section_changes_pending": "cmrunner/core/history.py",
    # the disclosure ledger: one row per model request
    "ledger": "cmrunner/core/ledger.py",
}

SQL_VERB = r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE(?: IF NOT EXISTS| IF EXISTS)?)\s+{table}\b"


def _production_files() -> list[str]:
    found = []
    for top in ("cmrunner", "hooks", "writer_proc", "bridge"):
        for folder, _dirs, files in os.walk(os.path.join(REPO, top)):
            found += [os.path.relpath(os.path.join(folder, f), REPO) for f in files if f.endswith(".py")]
    return sorted(found)


def _strings(path: str) -> list[str]:
    with open(os.path.join(REPO, path), encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


STRINGS = {path: _strings(path) for path in _production_files()}


def _created_tables() -> set[str]:
    text = "\n".join(STRINGS[MIGRATIONS])
    return set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)", text))


def _holders(table: str) -> set[str]:
    pattern = re.compile(SQL_VERB.format(table=re.escape(table)))
    return {path for path, strings in STRINGS.items() if any(pattern.search(s) for s in strings)}


def test_every_table_has_an_owner():
    assert sorted(_created_tables() - set(OWNERS)) == []
    assert sorted(set(OWNERS) - _created_tables()) == []


@pytest.mark.parametrize("table", sorted(OWNERS))
def test_only_the_owner_holds_sql_for(table):
    owner = OWNERS[table]
    holders = _holders(table) - {MIGRATIONS}
    if owner != MIGRATIONS:
        assert owner in holders, f"{owner} is named the owner of {table} but holds no SQL for it"
    assert sorted(holders - {owner}) == [], f"SQL for {table} outside its owner {owner}"
