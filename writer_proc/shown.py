"""What the Memory Agent is shown of a job's snapshot: each document as a reader gets it, secrets withheld.

Contract:
- ``view(paths, snapshot)`` returns, per target, the document the agent reads: the snapshot's own
  ``Document`` when nothing in it is withheld, else the text ``secrets.withhold`` delivers (each
  flagged section replaced by its placeholder, under its own heading when the heading is clean),
  parsed as a document of the same target. Findings come from the findings cache when it has the
  document, else from a deep scan; the process's allow-list (``safety.allowed``) drops the ones the
  user allowed.
- A section that was already there and is flagged therefore never reaches the model and never
  blocks a decision about something else (issue 23): the Writer renders the decision on the real
  snapshot (``apply.render``), so a section the decision does not touch is committed byte for byte
  as it was, and only what the decision writes is checked.
- If the withheld text is not a valid document (two withheld headings, a secret before the first
  section), the real document is shown and the agent's preflight refuses the job as before
  (``SENSITIVE_CONTENT_REJECTED``): nothing flagged is ever sent.
"""

from __future__ import annotations

from collections.abc import Mapping

from cmrunner.core import sections
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import Document
from cmrunner.secrets import safety, withhold


def view(paths: DataPaths, snapshot: Mapping[str, Document]) -> dict[str, Document]:
    shown: dict[str, Document] = {}
    for target, doc in snapshot.items():
        shown[target] = doc
        if not doc.exists:
            continue
        text = doc.data.decode("utf-8")
        found = withhold.findings_for(text, paths, deep=True)
        delivered, held = withhold.apply(text, target, found, safety.allowed())
        if held:
            try:
                shown[target] = sections.parse(target, delivered, doc.budgets)
            except CmError:
                pass  # the preflight refuses the real document instead
    return shown
