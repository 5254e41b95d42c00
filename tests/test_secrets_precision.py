"""Issue 23's targets on the memory corpus: few false alarms on real developer memory, secrets still caught.

The corpus (``tests/fixtures/memory_corpus.py``) is built from a fixed seed; ``bench/secrets_precision.py``
reports the same rates per rule in ``docs/benchmarks.md``. Here they are held to the issue's targets:
at most 1% of benign documents flagged, at most 0.2% of benign sections withheld, at least 97% of
the planted secrets caught, with the light rules (the hook's read path) and with the deep scan.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from memory_corpus import FOUR_NOTES, benign, secret

from cmrunner.secrets import safety, withhold

BENIGN = benign()
SECRET = secret()


def test_the_corpus_is_as_large_and_varied_as_promised():
    assert len(BENIGN) >= 300 and len(SECRET) >= 120
    assert BENIGN[0].text == FOUR_NOTES
    layouts = {doc.name.rsplit("-", 1)[-1] for doc in BENIGN[4:]}
    assert layouts == {"cm", "hand"}
    assert len({doc.secret_format for doc in SECRET}) >= 60
    units = sum(len(withhold.units(doc.text)) for doc in BENIGN)
    assert units >= 2000
    # every planted secret sits in the unit the corpus says (the check below would pass on nothing otherwise)
    for doc in SECRET:
        assert 0 < doc.secret_section < len(withhold.units(doc.text))


@pytest.mark.parametrize("deep", [False, True], ids=["light", "deep"])
def test_false_alarms_and_misses_stay_within_the_targets(deep):
    flagged = withheld = units = 0
    for doc in BENIGN:
        found = withhold.scan_units(doc.text, deep)
        flagged += bool(found)
        withheld += len({f.unit for f in found})
        units += len(withhold.units(doc.text))
    caught = sum(any(f.unit == doc.secret_section for f in withhold.scan_units(doc.text, deep))
                 for doc in SECRET)
    assert flagged <= len(BENIGN) // 100, f"{flagged} benign documents flagged"
    assert withheld <= units * 2 // 1000, f"{withheld} of {units} benign sections withheld"
    assert caught >= len(SECRET) * 97 // 100 + 1, f"{caught} of {len(SECRET)} secrets caught"


def test_the_four_notes_document_of_issue_23_is_clean():
    # On main before this change it was flagged as secret.high_entropy on the joined text
    # "fact2x0d6789fact2x0d6789Note" (docs/benchmarks.md, the "before" block).
    assert withhold.scan_units(FOUR_NOTES, deep=True) == []
    assert safety.scan_text(FOUR_NOTES, deep=True) == []
