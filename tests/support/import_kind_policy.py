"""Fake-model Memory Agent policies that file an imported file's sections where they do not belong.

Each ``# heading`` of an imported part becomes one ``retain`` decision (its title, its lines as the
body), in the order of the parts and headings, so a rejection's ``$.decisions[i]`` names one section.
``everything_in_profile``: a global import's sections all go to profile, a project import's to
preferences (the faulty model that ignores ``import_kind``); after a rejection the decision it
names moves: ``IMPORT_INSTRUCTION_IN_PROFILE`` to preferences, ``IMPORT_KIND_WRONG_TARGET`` to the
project's document (a global import's, to preferences).
``stubborn``: the same first submission every time, so the attempt ends on the rejection.
Stdlib only: it runs inside the fake server process.
"""

from __future__ import annotations

import json
import re

MOVES = ("IMPORT_INSTRUCTION_IN_PROFILE", "IMPORT_KIND_WRONG_TARGET")


def _sections(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            found.append((line.lstrip("#").strip(), []))
        elif line.strip() and found:
            found[-1][1].append(line.strip())
    return [(title, "\n".join(lines) + "\n") for title, lines in found if lines]


def _moved(state: dict) -> dict[int, str]:
    moved: dict[int, str] = {}
    for rejection in state["rejections"]:
        if rejection.get("code") not in MOVES:
            continue
        for error in rejection.get("schema_errors") or []:
            found = re.match(r"\$\.decisions\[(\d+)\]", str(error.get("path")))
            if found:
                moved[int(found.group(1))] = rejection["code"]
    return moved


def _decisions(state: dict, moved: dict[int, str]) -> list[dict]:
    bundles = {b["ingest_id"]: b for b in state["task"]["bundles"]}
    decisions: list[dict] = []
    for source in state["sources"]:
        bundle = bundles.get(source["handle"], {})
        if source["context_only"] or bundle.get("provenance") != "document_import":
            continue
        project = bundle["scope"] if bundle["scope"] != "global" else None
        for title, body in _sections(json.loads(source["text"])["text"]):
            target = "preferences" if project else "profile"
            code = moved.get(len(decisions))
            if code == "IMPORT_INSTRUCTION_IN_PROFILE":
                target = "preferences"
            elif code == "IMPORT_KIND_WRONG_TARGET":
                target = project or "preferences"
            decisions.append({"kind": "retain", "applicability": "global" if target in ("profile", "preferences")
                              else "project", "confidence": 0.9, "evidence": [source["evidence_ref"]],
                              "reason": "from the imported file", "admission": "remember", "lifetime": "stable",
                              "operations": [{"op": "put_section", "target": target, "section": None, "title": title,
                                              "body": body}]})
    return decisions


def everything_in_profile(state: dict) -> object:
    return _decisions(state, _moved(state))


def stubborn(state: dict) -> object:
    return _decisions(state, {})
