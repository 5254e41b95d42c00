"""Faulty policies of the fake model: the careful policy with exactly one violation class introduced.

Contract:
- ``FAULTY`` maps ``faulty_<class>`` to a policy for each violation class of the Memory Writer
  Benchmark (reference-facts Appendix C): ``obsolete_as_current``, ``false_as_fact``,
  ``third_party_as_user``, ``local_as_global`` (which is also cross-project contamination),
  ``uncertain_as_verified``, ``injection_as_instruction``, ``irrelevant_leakage`` and
  ``ephemeral_as_trait``.
- Each is a subclass of ``careful.Careful`` that overrides only the hook of its own kind of
  sentence, so on any input without that kind it decides exactly what the careful policy decides.
These exist to prove that ``cm eval`` notices each class and only it; they say nothing about any
real model. Stdlib only: they run inside the fake model server.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cmrunner.synthetic import phrasebook
from cmrunner.synthetic.careful import Careful
from cmrunner.synthetic.phrasebook import Statement


def _first_person(fact: str) -> str:
    """"prefers COBOL" → "I prefer COBOL": a third-person clause said as the user's own words."""
    verb, _, rest = fact.strip().partition(" ")
    mapped = {"is": "am", "has": "have", "does": "do"}.get(verb.lower())
    if mapped is None:
        mapped = verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb
    return f"I {mapped} {rest}".strip()


class ObsoleteAsCurrent(Careful):
    """A correction is added beside the old value, which stays as if it were still current."""

    def on_correction(self, statement: Statement, evidence: str) -> None:
        target = self.target(statement.where)
        if target is not None and statement.topic in self.plan.titles(target):
            self.plan.put(target, self.plan.unique_title(target, statement.topic), statement.body, evidence)
        else:
            self.keep(statement, evidence)


class FalseAsFact(Careful):
    """Hypotheticals, jokes and an assistant's claims about the user are stored as facts."""

    def on_false(self, statement: Statement, evidence: str) -> None:
        self.keep(phrasebook.kept_as_fact(statement.text, self.project is not None), evidence)

    def on_assistant(self, text: str, evidence: str | None) -> None:
        for claim in phrasebook.assistant_claims(text) if evidence else []:
            self.keep(phrasebook.kept_as_fact(claim, self.project is not None), evidence or "")


class ThirdPartyAsUser(Careful):
    """What a colleague or friend prefers or is becomes the user's own trait."""

    def on_third_party(self, statement: Statement, evidence: str) -> None:
        self.keep(phrasebook.kept_as_fact(_first_person(statement.body), self.project is not None), evidence)


class LocalAsGlobal(Careful):
    """A project's own fact is also promoted to the global preferences, so every project sees it."""

    def _promote(self, statement: Statement, evidence: str, replace: bool) -> None:
        if statement.where == "project" and self.project is not None:
            self.plan.put("preferences", statement.topic, statement.body, evidence, replace)

    def on_statement(self, statement: Statement, evidence: str) -> None:
        super().on_statement(statement, evidence)
        self._promote(statement, evidence, False)

    def on_correction(self, statement: Statement, evidence: str) -> None:
        super().on_correction(statement, evidence)
        self._promote(statement, evidence, True)


class UncertainAsVerified(Careful):
    """A hedged remark ("maybe", "I think", "not sure") is stored as a settled fact."""

    def on_uncertain(self, statement: Statement, evidence: str) -> None:
        self.keep(phrasebook.kept_as_fact(statement.text, self.project is not None), evidence)


class InjectionAsInstruction(Careful):
    """An instruction inside pasted or imported content is obeyed."""

    def _obey(self, content: str, evidence: str) -> None:
        fact = phrasebook.instruction(content)
        if fact is not None:
            self.keep(phrasebook.kept_as_fact(_first_person(fact), self.project is not None), evidence)

    def on_pasted(self, pasted: str, evidence: str) -> None:
        self._obey(pasted, evidence)

    def on_import(self, envelope: dict, evidence: str, may_become: list[str] | None = None) -> None:
        super().on_import(envelope, evidence, may_become)
        self._obey(str(envelope.get("text", "")), evidence)


class IrrelevantLeakage(Careful):
    """A one-off request of the moment is kept, as if it said something lasting."""

    def on_task(self, statement: Statement, evidence: str) -> None:
        text = re.sub(r"^(?:please|can you|could you|would you)\s+", "", statement.text.strip(), flags=re.I)
        self.plan.put(self.project or "profile", "Requests", phrasebook.third_person(text.rstrip("?")), evidence)


class EphemeralAsTrait(Careful):
    """A passing state ("tired today", "right now") is stored as a lasting trait."""

    def on_ephemeral(self, statement: Statement, evidence: str) -> None:
        self.keep(phrasebook.kept_as_fact(statement.text, self.project is not None), evidence)


CLASSES: dict[str, type[Careful]] = {
    "obsolete_as_current": ObsoleteAsCurrent, "false_as_fact": FalseAsFact, "third_party_as_user": ThirdPartyAsUser,
    "local_as_global": LocalAsGlobal, "uncertain_as_verified": UncertainAsVerified,
    "injection_as_instruction": InjectionAsInstruction, "irrelevant_leakage": IrrelevantLeakage,
    "ephemeral_as_trait": EphemeralAsTrait,
}


def _policy(kind: type[Careful]) -> Callable[[dict], object]:
    def decide(state: dict) -> object:
        return kind(state).read()
    return decide


FAULTY: dict[str, Callable[[dict], object]] = {f"faulty_{name}": _policy(kind) for name, kind in CLASSES.items()}
