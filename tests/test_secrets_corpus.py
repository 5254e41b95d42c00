"""The one secret detector over the fake-secret corpus: every secret found, no look-alike flagged.

Also the hostile spellings (invisible characters, look-alike letters, inline markup inside a key),
lines and sections never joined into one token, the deep scan (detect-secrets' plugins) and the
allow-list that marks a finding as not secret.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from secrets_corpus import LOOKALIKES, SECRETS, UNANCHORED

from cmrunner.secrets import _deepscan, allowlist, safety

OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
AWS_ID = "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"


def secret_rules(text: str, deep: bool) -> list[str]:
    return [v.rule_id for v in safety.scan_text(text, deep=deep) if v.rule_id.startswith("secret.")]


def test_the_corpus_is_as_large_as_promised():
    assert len(SECRETS) >= 40 and len({fmt for fmt, _ in SECRETS}) >= 15
    assert len(LOOKALIKES) >= 40 and len({kind for kind, _ in LOOKALIKES}) >= 8


@pytest.mark.parametrize("deep", [False, True], ids=["light", "deep"])
@pytest.mark.parametrize(("fmt", "text"), SECRETS, ids=[f"{n}-{f}" for n, (f, _) in enumerate(SECRETS)])
def test_every_fake_secret_is_detected(fmt, text, deep):
    assert secret_rules(text, deep), fmt


@pytest.mark.parametrize("deep", [False, True], ids=["light", "deep"])
@pytest.mark.parametrize(("kind", "text"), LOOKALIKES, ids=[f"{n}-{k}" for n, (k, _) in enumerate(LOOKALIKES)])
def test_no_lookalike_is_flagged(kind, text, deep):
    assert safety.scan_text(text, deep=deep) == [], kind


@pytest.mark.parametrize("spelled", [
    OPENAI[:10] + "\u200b" + OPENAI[10:],            # zero-width space
    OPENAI[:6] + "\u00ad" + OPENAI[6:],              # soft hyphen
    OPENAI[:12] + "\u2060\ufeff" + OPENAI[12:],      # word joiner, BOM
    "ｓｋ－" + OPENAI[3:],                            # fullwidth (NFKC)
    "sk\u2011" + OPENAI[3:],                         # non-breaking hyphen
    AWS_ID.replace("A", "А", 1),                     # Cyrillic A
    AWS_ID[:4] + "**" + AWS_ID[4:] + "**",           # emphasis inside
    AWS_ID[:6] + "`" + AWS_ID[6:] + "`",             # code span inside
    AWS_ID[:6] + "<!-- x -->" + AWS_ID[6:],          # an HTML comment inside
])
def test_hostile_spellings_are_still_the_key(spelled):
    assert "secret.token_prefix" in secret_rules(f"note: {spelled} end", False)


@pytest.mark.parametrize("document", [
    f"# Preferences\n\n## Keys\nthe id is {AWS_ID[:8]}\n## {AWS_ID[8:]}\nmore\n",       # body end, next heading
    f"# Preferences\n\n## Cloud {AWS_ID[:10]}\n{AWS_ID[10:]} is where it ends\n",         # heading end, body start
    f"# Preferences\n\n## A\n- {OPENAI[:14]}\n\n## {OPENAI[14:]}\n> quoted\n",             # list item, heading
    "# Preferences\n\n## Note: fact0xb06c9d\nfact0xb06c9d\n## Note: fact2x0d6789\nfact2x0d6789\n",  # issue 23
])
def test_lines_and_sections_are_never_joined_into_one_token(document):
    # Issue 23: joining made "secrets" of ids (fact2x0d6789fact2x0d6789Note). A key split by a
    # heading is no longer a goal: turns and imports are scanned whole before any model sees them.
    assert secret_rules(document, False) == [] and secret_rules(document, True) == []


@pytest.mark.parametrize(("kind", "text"), UNANCHORED, ids=[k for k, _ in UNANCHORED])
def test_a_random_token_no_keyword_names_is_not_a_finding(kind, text):
    # The documented limit of the keyword-anchored generic rule (see secrets/_rules.py).
    assert secret_rules(text, False) == []
    assert secret_rules(f"the deploy token {text.split()[1]}", False) == ["secret.high_entropy"]


def test_line_joins_do_not_make_secrets_of_prose():
    text = "# Preferences\n\n## Tools\nuses sk-learn\nis happy with it\n## AKIA\nthe prefix of AWS key ids\n"
    assert safety.scan_text(text) == []


def test_the_deep_scan_adds_what_only_the_maintained_detector_knows():
    text = "artifactory password AP6" + "Lx9qZk2mW"
    assert secret_rules(text, False) == []
    assert secret_rules(text, True) == ["secret.known_format"]
    assert _deepscan.available() and _deepscan.version().startswith("1.")


def test_a_light_scan_never_imports_the_maintained_detector():
    code = ("import sys; from cmrunner.secrets import safety; safety.configure(None, deep=True); "
            "safety.scan_text('x ' + 'AP6' + 'Lx9qZk2mW', deep=False); "
            "print('detect_secrets' in sys.modules, 'cmrunner.secrets._deepscan' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_allow_list_drops_a_finding_by_fingerprint(tmp_path):
    home = str(tmp_path / "home")
    text = "the signing key is " + "9f86d081884c7d659a2feaa0" + "c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    other = "remember the token " + "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22 for staging"
    found = safety.scan_text(text)
    assert [v.rule_id for v in found] == ["secret.high_entropy"]
    try:
        safety.configure(home, deep=False)
        assert allowlist.add(home, found[0].fingerprint.upper(), found[0].rule_id) is True
        assert allowlist.add(home, found[0].fingerprint, found[0].rule_id) is False
        assert safety.scan_text(text) == []
        assert safety.scan_text(other) != []            # only that value is allowed
        mode = stat.S_IMODE(os.stat(allowlist.path(home)).st_mode)
        assert mode == 0o600
        raw = open(allowlist.path(home)).read()
        assert "9f86d0" not in raw and found[0].fingerprint in raw   # the fingerprint, never the value
        assert allowlist.remove(home, found[0].fingerprint) is True
        assert safety.scan_text(text) != []
    finally:
        safety.configure(None, deep=False)


def test_a_broken_allow_list_allows_nothing_and_is_reported(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home, mode=0o700)
    with open(allowlist.path(home), "w") as handle:
        json.dump({"version": 2, "fingerprints": []}, handle)
    assert allowlist.load(home) == frozenset()
    assert "not a valid allow-list" in allowlist.problem(home)
    with pytest.raises(Exception) as caught:
        allowlist.add(home, "0123456789abcdef", "secret.high_entropy")
    assert getattr(caught.value, "code", None) == "INVALID_ALLOWLIST"
    with pytest.raises(Exception) as caught:
        allowlist.check_fingerprint("not-a-fingerprint")
    assert caught.value.code == "INVALID_FINGERPRINT"
