"""Issue 32: the secret detector's recall holds on a corpus it was not tuned on, and the common forms are caught.

The corpus is ``tests/fixtures/scanner_corpus.py`` (formats from maintained scanners' published lists,
written independently of ``memory_corpus.py``), generated from fixed seeds; its held-out part was not
read for failures while the rules were tuned. ``bench/secrets_heldout.py`` reports both parts per rule
in ``docs/benchmarks.md``. Here the held-out part is held to the issue's targets, and each common form
the issue names is a case of its own (``NEW_FORMS`` were all missed before issue 32; ``ALREADY_CAUGHT``
were not, and stay caught).
"""

from __future__ import annotations

import os
import random
import string
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from scanner_corpus import BENIGN_DOCS, PARTS, SECRET_DOCS, corpus, digest

from cmrunner.secrets import safety, withhold

_RNG = random.Random(3232)
AN = string.ascii_letters + string.digits


def rand(size: int, alphabet: str = AN) -> str:
    """Random characters drawn at import from a fixed seed (no key-shaped literal is committed)."""
    while True:
        value = "".join(_RNG.choice(alphabet) for _ in range(size))
        classes = (string.digits, string.ascii_lowercase, string.ascii_uppercase)
        if size < 8 or all(set(value) & set(cls) or not set(alphabet) & set(cls) for cls in classes):
            return value


HEX = "0123456789abcdef"
B64 = AN + "+/"
PW = "Tq8#vRm4Lz"
GHP = "gh" + "p_" + rand(36)
PEM_LINES = ["MIIEow" + "IBAAKCAQEA" + rand(48, B64)] + [rand(64, B64) for _ in range(3)]

NEW_FORMS = [
    ("curl -u", f"curl -u admin:{PW} https://build.acme.io/api"),
    ("curl --user quoted", f"curl --user 'ci:{PW}' -X POST https://ci.lab.net/hook"),
    ("mysql -p", f"mysql -h db1 -u root -p{PW} orders"),
    ("sshpass -p", f"sshpass -p '{PW}' ssh deploy@10.0.3.17"),
    ("docker login -p", f"docker login -u dana -p {PW} registry.acme.io"),
    ("redis-cli -a", f"redis-cli -h cache1 -a {PW} ping"),
    ("PGPASSWORD", f"PGPASSWORD={PW} psql -h db1 -U app"),
    ("smbclient user%pass", f"smbclient //nas/share -U ops%{PW}"),
    ("openssl -passin", f"openssl pkcs12 -in c.p12 -passin pass:{PW}"),
    ("login pair in prose", f"Router login: admin / {PW}"),
    ("user and password words", f"For the NAS use username ops and password {PW}."),
    ("as user with password", f"log in to grafana as admin with {PW}"),
    ("laravel APP_KEY", "APP_KEY=base64:" + rand(43, B64) + "="),
    ("signing key hex", "JWT_SIGNING_KEY=" + rand(64, HEX)),
    ("rails SECRET_KEY_BASE", "SECRET_KEY_BASE=" + rand(128, HEX)),
    ("azure service bus", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey="
     + rand(43, B64) + "="),
    ("azure SAS signature", "https://acme.blob.core.windows.net/x?sv=2022-11-02&sp=r&sig=" + rand(40, AN) + "%3D"),
    ("pem body without BEGIN", "\n".join(PEM_LINES + ["-----END RSA PRIVATE KEY-----"])),
    ("pem body alone", "\n".join(PEM_LINES[:2])),
    ("openssh key body", "b3BlbnNzaC1r" + "ZXktdjEAAAAA" + rand(60, B64)),
    ("spaced github token", "ghp_ " + " ".join(GHP[4:][i:i + 6] for i in range(0, 36, 6))),
    ("spaced aws key id", "AK" + "IA " + " ".join(rand(16, string.ascii_uppercase + string.digits)[i:i + 4]
                                                  for i in range(0, 16, 4))),
    ("dash-grouped gitlab token", "glpat- " + "-".join(rand(24)[i:i + 8] for i in range(0, 24, 8))),
    ("groq key", "gs" + "k_" + rand(52)),
    ("planetscale token", "pscale" + "_tkn_" + rand(43)),
    ("tailscale key", "tskey" + "-api-" + rand(17) + "-" + rand(33)),
    ("atlassian api token", "ATATT" + "3xFfGF0" + rand(180, AN + "-_")),
    ("new prefixed shape", "vcp" + "_" + rand(56)),
]

# Forms the detector caught before issue 32 too, kept beside the new ones so that they stay caught.
ALREADY_CAUGHT = [
    ("encryption key urlsafe", "export ENCRYPTION_KEY=\"" + rand(43, AN + "-_") + "=\""),
    ("yaml signing_key", "signing_key: \"" + rand(32, B64) + "\""),
    ("azure storage connection string", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
     + rand(86, B64) + "==;EndpointSuffix=core.windows.net"),
    ("anthropic-style admin key", "sk-ant-" + "admin01-" + rand(93, AN + "-_") + "AA"),
]

LOOKALIKES = [
    "API_KEY=your-key-here", "api_key: <YOUR_API_KEY>", "SIGNING_KEY=${SIGNING_KEY}",
    "curl -u \"$API_USER:$API_TOKEN\" https://api.acme.io", "curl -u dana: https://x.acme.io (prompts)",
    "mysql -h db1 -u root -p orders", "mysql -u app -p\"$MYSQL_PASSWORD\" shop", "sshpass -f ~/.pass ssh ops@h",
    "echo \"$PAT\" | docker login ghcr.io -u dana --password-stdin", "read / write access for ops / www-data",
    "PLAT-1204 / PLAT-1207 are the same bug", "The token format is ghp_ followed by 36 characters.",
    "glpat- tokens expire after a year.", "AccountKey=<storage-account-key>", "SharedAccessKey={{ .Values.key }}",
    "cert body MIIDdzCCAl" + "+gAwIBAgIJ" + rand(40, B64), "commit " + rand(40, HEX), "sha256:" + rand(64, HEX),
    "SSH_KEY_PATH=~/.ssh/id_ed25519", "PUBLIC_KEY=" + rand(44, B64), "cache_key: user-" + rand(32, HEX),
    "runs as root with sudo", "fingerprint SHA256:" + rand(43, B64),
    # lines of real code the first version of these rules flagged (Python's email/feedparser.py, platformdirs)
    "# RFC 2822 $3.6.8 Optional fields.  ftext is %d33-57 / %d59-126, Any character",
    "key = winreg.OpenKey(winreg.HKEY_CURRENT_USER, r\"Software\\Microsoft\\Windows\\CurrentVersion\")",
]


def secret_rules(text: str, deep: bool = False) -> list[str]:
    return [v.rule_id for v in safety.scan_text(text, deep=deep) if v.rule_id.startswith("secret.")]


@pytest.mark.parametrize(("form", "text"), NEW_FORMS + ALREADY_CAUGHT, ids=[f for f, _ in NEW_FORMS + ALREADY_CAUGHT])
def test_a_common_form_of_issue_32_is_a_secret(form, text):
    assert secret_rules(text), form
    # and where a reader meets it: the section holding it is withheld
    document = f"# Project\n\n## Access\n{text}\n"
    assert {f.unit for f in withhold.scan_units(document)} == {1}


@pytest.mark.parametrize("text", LOOKALIKES)
def test_a_lookalike_of_those_forms_is_not(text):
    assert safety.scan_text(text, deep=True) == []


def test_the_corpus_is_generated_the_same_on_every_run():
    first, again = corpus("tuning"), corpus("tuning")
    assert first == again
    benign, secrets = first
    assert len(benign) == BENIGN_DOCS >= 300 and len(secrets) == SECRET_DOCS >= 400
    assert len({d.fmt for d in secrets}) >= 120 and len({d.family for d in secrets}) == 7
    # the held-out part is other documents, not a copy of the tuning part
    held_benign, held_secrets = corpus("heldout")
    assert not {d.text for d in benign + secrets} & {d.text for d in held_benign + held_secrets}
    # the figures in docs/benchmarks.md name these digests: a changed generator is a changed corpus
    assert digest(benign + secrets) == "916ff30dce6d"
    assert digest(held_benign + held_secrets) == "7f11afa41e67"
    for doc in secrets:  # every secret sits in the unit the corpus says
        assert 0 < doc.section < len(withhold.units(doc.text))


@pytest.mark.parametrize("deep", [False, True], ids=["light", "deep"])
def test_the_held_out_part_meets_the_targets(deep):
    assert "heldout" in PARTS
    benign, secrets = corpus("heldout")
    flagged = withheld = units = 0
    for doc in benign:
        found = withhold.scan_units(doc.text, deep)
        flagged += bool(found)
        withheld += len({f.unit for f in found})
        units += len(withhold.units(doc.text))
    caught = sum(any(f.unit == doc.section for f in withhold.scan_units(doc.text, deep))
                 and bool(secret_rules(doc.text, deep)) for doc in secrets)
    assert flagged * 100 <= len(benign), f"{flagged} benign documents flagged"
    assert withheld * 1000 <= units * 2, f"{withheld} of {units} benign sections withheld"
    assert caught * 100 >= len(secrets) * 97, f"{caught} of {len(secrets)} secrets caught"
