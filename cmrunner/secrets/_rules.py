"""The secret rules that need no label: provider key formats, high-entropy tokens, prose passwords.

Contract
- ``provider_findings(text)``: well-known provider token formats beyond the reference's prefixes
  (rule ``secret.token_prefix``): Slack (incl. app tokens and webhook URLs), Stripe secret,
  restricted and webhook keys, GitLab personal/deploy/runner tokens, Google OAuth access tokens and
  client secrets, Twilio API key SIDs, SendGrid, npm, PyPI, Hugging Face, Mailgun, Mailchimp,
  Discord bot tokens, Telegram bot tokens, DigitalOcean, Shopify, Square, Databricks, Postman,
  HashiCorp Vault, Doppler, Grafana, Linear, Notion, age secret keys, Azure storage account keys.
  Case-sensitive, never inside a longer token.
- ``entropy_findings(text)`` (rule ``secret.high_entropy``): a bare token of 20..1024 characters
  from the base64/base64url alphabet that mixes upper case, lower case and digits, whose Shannon
  entropy is at least ``ENTROPY_BITS[len]`` (about the 1st percentile of random strings of that
  length), whose letter/digit classes change often (``MIN_SWITCH_RATIO``) and that is not made of
  words (``MAX_WORDLIKE`` of its characters in lower-case runs of 4 or more, as camelCase and
  snake_case identifiers are). Hex strings and lower-case alphanumeric strings of 32+ characters
  count only after a credential word on the same line (``key``, ``secret``, ``token``, ...)
  and never after a digest word (``sha``, ``hash``, ``commit``, ``digest``, ``checksum``, ...):
  they cannot be told from digests otherwise. Never a finding: UUIDs, ``sec_`` refs, ``sha256:``
  / ``sha1:`` digests, ``data:…;base64,`` payloads, URLs' paths and file paths (a token that is
  all path segments of words), tokens that other rules own (JWTs, known prefixes).
- ``prose_findings(text)`` (rule ``secret.credential``): "my password is X", "pw was X",
  "the passcode for the router is X", "api key is X": a password word, up to four words of
  context, a copula (is/was/is now/has been/will be/set to/was changed to; ``:`` and ``=`` are the
  labelled rule's, with its tolerance of code), then a value that is
  quoted, or holds a digit or a password symbol (``@#$%^&*+=~|``). All-letter unquoted values are
  left out (prose like "the password is required"): a known limit.
The core of a finding is the token or value itself (what the fingerprint digests). Stdlib only.
"""

from __future__ import annotations

import math
import re

Finding = tuple[int, str, str]

ENTROPY_MIN_LEN = 20
ENTROPY_MAX_LEN = 1024
MIN_SWITCH_RATIO = 0.30
MAX_WORDLIKE = 0.40


def entropy_threshold(length: int) -> float:
    """Minimum Shannon entropy (bits/char) for a base64-alphabet token of ``length`` characters."""
    if length < 24:
        return 3.55
    if length < 32:
        return 3.85
    if length < 40:
        return 4.15
    if length < 64:
        return 4.4
    return 4.7


_PROVIDER = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"xox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{8,255}|xapp-[0-9]-[A-Z0-9]{6,}-[0-9]{6,}-[a-f0-9]{32,}"
    r"|hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{6,}/[A-Z0-9/]{6,}[A-Za-z0-9]{16,}"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}|whsec_[A-Za-z0-9]{24,}"
    r"|gl(?:pat|dt|rt|ptt|ft|soat)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,}"
    r"|ya29\.[A-Za-z0-9_-]{30,}|GOCSPX-[A-Za-z0-9_-]{20,}"
    r"|SK[0-9a-fA-F]{32}(?![0-9A-Za-z])"
    r"|SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"
    r"|npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"
    r"|pypi-AgE[A-Za-z0-9_-]{50,}"
    r"|hf_[A-Za-z]{30,40}(?![A-Za-z0-9])"
    r"|key-[0-9a-f]{32}(?![0-9a-z])|[0-9a-f]{32}-us[0-9]{1,2}(?![0-9a-z])"
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"
    r"|[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"
    r"|do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"
    r"|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}|EAAA[A-Za-z0-9_-]{60}"
    r"|dapi[a-f0-9]{32}(?:-[0-9])?|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}|dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{40,}"
    r"|gl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}|lin_(?:api|oauth)_[A-Za-z0-9]{40}"
    r"|(?:secret|ntn)_[A-Za-z0-9]{43}(?![A-Za-z0-9])"
    r"|AGE-SECRET-KEY-1[0-9A-Z]{58}"
    r"|AccountKey=[A-Za-z0-9+/]{86}=="
    r")")
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{20,}")
_HEX_OR_LOWER = re.compile(r"(?<![A-Za-z0-9_+/=-])[0-9a-z]{32,}(?![A-Za-z0-9_+/=-])|(?<![A-Za-z0-9_+/=-])"
                           r"[0-9A-F]{32,}(?![A-Za-z0-9_+/=-])")
_CREDENTIAL_WORD = re.compile(
    r"(?i)(?:key|secret|token|passw|pwd|credential|auth|private|signing|seed|salt|api|bearer|session|cookie"
    r"|encryption|hmac)")
_DIGEST_WORD = re.compile(
    r"(?i)(?:sha|hash|digest|commit|checksum|md5|etag|revision|\brev\b|fingerprint|integrity|\bid\b|uuid|"
    r"build|object|blob|tree|oid|version)")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_JWT_OR_KNOWN = re.compile(r"eyJ|gh[pousr]_|github_pat_|sk-|AKIA|ASIA|AIza|glpat-|xox")
_DIGEST_PREFIXES = ("base64,", "sha256:", "sha1:", "sha512:", "sha384:", "md5:", "sha256-", "sha384-", "sha512-", "ssh-rsa ", "ssh-ed25519 ",
                    "ssh-dss ", "nistp256 ", "nistp384 ", "nistp521 ")
_DIGIT = re.compile(r"[0-9]")
_LOWER_RUN = re.compile(r"[a-z]{4,}")
_PATH_SEGMENT = re.compile(r"[A-Za-z][a-z]*[0-9]{0,3}|[A-Z]{2,5}[0-9]{0,3}|[0-9]{1,4}|[a-z]+(?:[_-][a-z0-9]+)*")

_PASSWORD_WORD = (r"(?:pass(?:word|wd|phrase|code)s?|pwd?|api[ \t_-]?key|access[ \t_-]?key|secret(?:[ \t_-]key)?"
                  r"|token)")
_COPULA = (r"(?:(?:is|was|are|has[ \t]+been|will[ \t]+be)(?:[ \t]+(?:now|(?:set|changed|reset)[ \t]+to))?"
           r"|(?:set|changed|reset)[ \t]+to)")
_PROSE = re.compile(
    rf"(?i)(?<![A-Za-z0-9_]){_PASSWORD_WORD}(?:[ \t]+(?:for|of|to|on|at|in)(?:[ \t]+[^\s:=]+){{1,4}}?)?"
    rf"[ \t]+{_COPULA}[ \t]+(?P<quote>[\"'`“‘])?(?P<value>[^\s\"'`“”‘’]{{1,256}})")
_VALUE_TRAILING = ".,;:!?)]}"
_PASSWORD_SYMBOL = re.compile(r"[0-9@#$%^&*+=~|]")
_PROSE_STOPWORDS = frozenset(
    ["a", "an", "the", "not", "no", "required", "needed", "optional", "mandatory", "stored", "saved", "kept", "in", "on", "at", "of", "for", "my", "your", "our", "his", "her", "their", "its", "this", "that", "same", "different", "wrong", "correct", "incorrect", "invalid", "valid", "empty", "missing", "set", "unset", "expired", "changed", "reset", "hidden", "masked", "redacted", "secret", "private", "public", "weak", "strong", "long", "short", "too", "very", "still", "being", "managed", "rotated", "encrypted", "hashed", "sent", "shown", "visible", "there", "here", "what", "which", "where", "when", "how"])


def _entropy(token: str) -> float:
    counts: dict[str, int] = {}
    for char in token:
        counts[char] = counts.get(char, 0) + 1
    size = len(token)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _char_class(char: str) -> int:
    if "a" <= char <= "z":
        return 0
    if "A" <= char <= "Z":
        return 1
    if "0" <= char <= "9":
        return 2
    return 3


def _switch_ratio(token: str) -> float:
    classes = [_char_class(c) for c in token if _char_class(c) != 3]
    if len(classes) < 2:
        return 0.0
    return sum(a != b for a, b in zip(classes, classes[1:])) / (len(classes) - 1)


def _wordlike(token: str) -> float:
    return sum(len(run) for run in _LOWER_RUN.findall(token)) / len(token)


def _is_path(token: str) -> bool:
    segments = [part for part in token.split("/") if part]
    return len(segments) >= 2 and all(_PATH_SEGMENT.fullmatch(part) for part in segments)


def provider_findings(text: str) -> list[Finding]:
    return [(m.start(), "secret.token_prefix", m.group()) for m in _PROVIDER.finditer(text)]


def random_looking(token: str) -> bool:
    """The base64-alphabet test of ``entropy_findings`` for one token (see the module contract)."""
    core = token.rstrip("=")
    if not ENTROPY_MIN_LEN <= len(core) <= ENTROPY_MAX_LEN:
        return False
    # str methods first: they reject most tokens (words, paths, numbers) at C speed
    if core.lower() == core or core.upper() == core or _DIGIT.search(core) is None:
        return False
    if _is_path(core) or _switch_ratio(core) < MIN_SWITCH_RATIO or _wordlike(core) > MAX_WORDLIKE:
        return False
    return _entropy(core) >= entropy_threshold(len(core))


def entropy_findings(text: str) -> list[Finding]:
    found: list[Finding] = []
    if len(text) < ENTROPY_MIN_LEN:
        return found
    for m in _TOKEN.finditer(text):
        start, token = m.start(), m.group()
        if start and text[start - 1] in ".@%\\&?#" or _excluded_context(text, start, token):
            continue
        # A leading or trailing separator is punctuation, not part of the token.
        stripped = token.strip("-_/+")
        if random_looking(stripped):
            found.append((start + token.index(stripped), "secret.high_entropy", stripped))
    for m in _HEX_OR_LOWER.finditer(text):
        token = m.group()
        if token.isalpha() or not any(c.isalpha() for c in token):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[max(line_start, m.start() - 60):m.start()]
        labelled = _CREDENTIAL_WORD.search(before) and not _DIGEST_WORD.search(before) \
            and not _UUID.search(text[max(0, m.start() - 1):m.end() + 1])
        if labelled and not (token.islower() and not _is_hex(token) and _wordlike(token) > MAX_WORDLIKE):
            found.append((m.start(), "secret.high_entropy", token))
    return found


def _is_hex(token: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in token)


def _excluded_context(text: str, start: int, token: str) -> bool:
    head = text[max(0, start - 24):start]
    if head.endswith(_DIGEST_PREFIXES) or token.startswith(("sec_", "sha256-", "sha384-", "sha512-")) \
            or _JWT_OR_KNOWN.match(token):
        return True
    word_start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start), text.rfind("\t", 0, start)) + 1
    if "://" in text[word_start:start]:
        return True  # the path or query of an address
    begin = text.rfind("-----BEGIN", 0, start)
    # inside a PEM block: a private key is secret.private_key's, a certificate or public key is public
    return begin >= 0 and text.find("-----END", begin, start) < 0


def prose_findings(text: str) -> list[Finding]:
    found: list[Finding] = []
    for m in _PROSE.finditer(text):
        value = m.group("value")
        quoted = m.group("quote") is not None
        if not quoted:
            value = value.rstrip(_VALUE_TRAILING)
        if len(value) < 4 or value.lower() in _PROSE_STOPWORDS:
            continue
        if quoted or _PASSWORD_SYMBOL.search(value):
            found.append((m.start(), "secret.credential", value))
    return found
