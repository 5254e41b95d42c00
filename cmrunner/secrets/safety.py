"""Sensitive-content scanner: finds secrets and personal data before text is stored or sent.

Contract
- ``scan_text(text, field_path)`` returns every rule hit in ``text`` as ``Violation(rule_id,
  field_path, fingerprint)``, ordered by position (then rule order), one per distinct
  ``(rule_id, field_path, fingerprint)``.
- ``scan_value(obj, path)`` walks JSON-like data (dict / list / tuple / str / int / bytes; floats,
  bools and None carry no text) in document order and scans every string value **and every object
  key**. Field paths are RFC 6901 JSON pointers under ``path``. A key that itself trips a rule is
  never written into a path: its segment becomes ``~redacted-key-<ordinal>`` (``~`` + a letter is
  not a legal pointer escape, so it cannot collide with a real key), also below it.
- ``require_clean(obj, path)`` raises ``SensitiveContentError`` (code ``SENSITIVE_CONTENT_REJECTED``)
  whose message names rule ids and field paths only.

Invariants
- Matched text never leaves this module: not in violations, messages or reprs. The fingerprint is
  the first 16 hex digits of sha256(domain prefix, rule id, the hit's normalised core), stable across
  runs and machines so callers can see "the same secret again". It is one-way, but a value from a
  small space (a phone number) can be confirmed by brute force: fingerprints are for correlation.
- The process's detector (``configure``): ``deep`` adds the maintained detector (imported on first
  use, so never on the hook path; unconfigured processes scan with the light rules only), and the
  home's allow-list (``allowlist``) drops findings whose fingerprint the user marked as not secret.
  ``scan_text(..., deep=False)`` forces the light rules (the read path).
- Stdlib only (``re``, ``hashlib``, ``unicodedata``); every pattern is compiled at import. Label patterns are
  literal-led and run case-sensitively over a lowercased copy (offsets kept aligned), values and
  lengths are bounded, so 64 KiB of prose scans in a few milliseconds and no input is quadratic.
- Deterministic: no clock, locale or randomness is consulted.

Rules (ids from the reference) and the decisions taken where the reference is silent
- Latin labels match case-insensitively and only at a word start: not after an ASCII letter or
  digit, or at a camelCase hump (``userPassword``). ``_`` is a boundary, so ``OPENAI_API_KEY=…`` is
  labelled. CJK labels need no boundary (no spaces in Chinese). Two-word labels accept ``_``, ``-``,
  a space or nothing between the words.
- ``secret.private_key``: a PEM header ``-----BEGIN … PRIVATE KEY-----`` (RSA, EC, DSA, OPENSSH,
  ENCRYPTED, PGP … BLOCK). The core is the header plus the first 64 base64 characters after it.
- ``secret.credential``: a label (api key, access/refresh/auth token, password(s), passwd,
  passphrase, cookie(s), session/client secret, secret (access) key, private key, recovery code(s),
  助记词, 密码, 私钥: the reference's list plus a few same-kind names), then ``:``, ``：``, ``=``,
  ``:=`` or ``=>`` (not ``==``), then a value on the same line. Quotes, JSON-escaped quotes, Python
  string prefixes (``b'…'``) and Markdown emphasis may wrap label and value. ``password_field``,
  ``api_key_env`` and a bare ``OPENAI_API_KEY`` never trip: the separator must follow the label. Tolerated as not a secret,
  quoted or not: an empty or one-character value (``password:`` at the end of a line; the next line
  is not read); exactly ``[REDACTED]``, ``<REDACTED>`` or ``[已脱敏]`` ending the value
  (case-sensitive; ``abc[REDACTED]`` trips, its prefix may be real); environment references
  ``$NAME``, ``${NAME}``, ``%NAME%`` and UPPER_SNAKE names with an underscore; template
  placeholders in angle brackets (``<your-key-here>``, not the reference's, which has none); masks (``***``,
  ``xxx``, ``•••``, ``…``); values made only of punctuation and format placeholders (``%s``,
  ``{}``, ``{name}``, ``{{ … }}``). Tolerated only unquoted, because then they are code: the
  literals None/null/nil/undefined/true/false, the types str/string/bytes/SecretStr/Optional[str],
  ``[]``/``{}``/``()``, ``os.environ…``/``os.getenv…``/``process.env…``, a call or subscript
  (``getpass()``, ``auth[2]``), a dotted attribute whose last part names a credential
  (``self.password``) and, with ``=`` only, the label's own name (``password=password``, a keyword
  argument; ``password: password`` and ``password = "password"`` are values). Anything else trips,
  prose (``Password: see the vault``) and code assigning plain variables (``passwd = acct``)
  included: neither can be told from a password.
- ``secret.authorization_header``: ``Authorization: Bearer|Basic <token of ≥12 chars>`` (quotes
  allowed). A bare ``Bearer/Basic <token>`` trips only when the token mixes letters and digits, so
  "bearer authentication" does not.
- ``secret.credential_url``: ``scheme://user:password@host`` (the user may be empty, as in redis
  URLs); a password that is a placeholder, environment reference or mask is tolerated. The
  ``password@host`` tail is not reported again as an e-mail address, nor is any URL userinfo
  (``https://name@host``).
- ``secret.token_prefix``: ``gh[pousr]_`` + ≥20, ``github_pat_`` + ≥20, ``sk-`` / ``sk-proj-`` /
  ``sk-svcacct-`` / ``sk-admin-`` + ≥20 where some ``-``/``_``-separated segment of ≥16 chars mixes
  letters and digits (``sk-learn`` and long kebab-case words never trip), ``AKIA``/``ASIA`` + 16;
  same-kind extensions: ``glpat-``, ``xox[abprs]-`` (with a digit), ``AIza`` + 35,
  ``sk_live_``/``rk_live_``, JWTs (``eyJ….eyJ….…``). Case-sensitive, never inside a longer token.
- ``identity.government_id``: ``身份证``/``身份证号``/``身份证号码``/``公民身份号码`` then 8–18 digits
  (the last may be X); or any standalone 18-character ID whose GB 11643 birth date (1800–2099, a
  real calendar day) and ISO 7064 MOD 11-2 check character are valid. Masked IDs do not match.
- ``identity.email``: a local part, ``@``, a dotted domain with an alphabetic TLD. Reserved example
  domains (RFC 2606/6761: example.com/.net/.org, *.example, *.test, *.invalid, *.localhost) and
  the SSH remote user ``git@`` are not personal data and are skipped.
- ``identity.phone``: labelled only (phone/mobile/cell/tel/telephone/whatsapp [number|no|#],
  电话[号码], 手机[号码|号], 联系电话, 联系方式), separator optional, then 7–15 digits with single
  spaces, dots, hyphens or parentheses between them. Unlabelled numbers never trip.
- ``payment.card``: labelled (card number, credit/debit/bank card [number], cc#, 卡号, 信用卡号,
  银行卡号, 借记卡号) 12–19 digits, not all the same; or unlabelled: digit groups joined by single
  spaces or hyphens form a chain, and every window of whole groups holding 13–19 digits is tested
  with Luhn. Ordinary numbers are kept out by: dropping windows that touch a UUID or equal a
  checksum-valid 18-digit government ID (reported as that instead); ignoring groups glued to
  letters, ``_``, a leading ``+`` (E.164 phones) or ``-`` (negative numbers), or to decimal and
  thousands separators; breaking chains at groups shorter than 3 digits (dates, times); never
  splitting a group; skipping all-same digits; requiring an unlabelled window to start with 2–6 or 9
  (ISO/IEC 7812 banking and travel networks), which keeps epoch-millisecond timestamps (leading 1)
  out; and skipping windows that start with a compact date 20YYMMDD (timestamps; no network issues
  numbers starting with 20). Long hashes and space-separated lists of 3–4-digit numbers can still
  trip by chance (1 in 10 per Luhn test).
- ``address.full``: labelled (home/street/mailing/postal/residential/shipping/billing address,
  家庭地址, 家庭住址, 完整住址, 居住地址, 收货地址, 通讯地址, 通信地址, 住址), a separator and a
  non-empty value that is not exactly a redaction placeholder.
- ``secret.token_prefix`` also covers the provider formats of ``_rules.provider_findings``
  (Slack, Stripe, GitLab, Google, Twilio, SendGrid, npm, PyPI, Hugging Face, ...);
  ``secret.high_entropy`` is a bare random-looking token (base64 alphabet, or hex after a credential
  word) and ``secret.credential`` also covers passwords in prose ("my password is X"): both in
  ``_rules``, which states their thresholds. ``secret.known_format`` is a hit of the
  maintained detector (detect-secrets' provider plugins, ``_deepscan``), only in a deep scan.
- Issue 32's forms (``_forms``, which states their tests): ``secret.credential`` also covers a
  password given to a command-line client (``curl -u u:pw``, ``mysql -pPW``, ``sshpass -p``,
  ``docker login -p``, ``PGPASSWORD=`` …), a login/password pair in prose (``admin / Tq8#vRm4Lz``),
  a key setting whose name says key/secret/signing/salt set to a random value (``APP_KEY=base64:…``)
  and a connection string's ``AccountKey=`` / ``SharedAccessKey=`` / SAS ``sig=``;
  ``secret.private_key`` also covers a PEM body without its BEGIN line; ``secret.token_prefix``
  also reads a known prefix followed by spaced or dashed groups (``ghp_ AbC1 dEf2 …``) compacted.
- Placeholders ``your-…`` and ``…-here`` (``API_KEY=your-key-here``) are tolerated as values.
- ``content.private_conversation``: Appendix B names the rule without a definition; an earlier
  public version of the reference's rules.ts defines it as the markers 完整私聊, 完整私人对话 and
  "full private chat/conversation", which is what is implemented.
- Before any rule, text is folded (``_textnorm.fold``): zero-width and other invisible characters
  removed, NFKC, dashes and Latin look-alike letters folded, so ``sk-<ZWSP>…`` is a key. Token rules
  (prefixes, provider formats, entropy) also read each line without its inline markup
  (``_textnorm.unmarked``), so a key broken up by ``**``/backticks is still one key. Lines and
  sections are never joined into one token (issue 23: that made secrets of ids); a secret is
  stopped on the way in, before any model could split one across lines.
- ``secret.credential`` also takes generic identifiers ending in ``_secret``/``_token``
  (``JWT_SECRET=…``, ``DOPPLER_TOKEN=…``) when the value is 8+ characters and not one plain word.
- An unlabelled number that an id label names (``trace_id=…``, ``order #…``) is not a card.
- Object members pair up: for ``{"password": "hunter2"}`` the labelled rules also run over
  ``key + ": " + start of value``, reported at the value's path (the hit must start in the key).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import namedtuple
from collections.abc import Callable

from cmrunner.core.errors import CmError
from cmrunner.secrets import _forms, _rules, _textnorm

RULE_IDS: tuple[str, ...] = (
    "secret.private_key", "secret.credential", "secret.authorization_header", "secret.credential_url",
    "secret.token_prefix", "identity.government_id", "identity.email", "identity.phone", "payment.card",
    "address.full", "content.private_conversation", "secret.high_entropy", "secret.known_format",
)
SECRET_RULES = frozenset(rule for rule in RULE_IDS if rule.startswith("secret."))
_RANK = {rule: rank for rank, rule in enumerate(RULE_IDS)}
_FINGERPRINT_DOMAIN = b"cm.safety.fingerprint.v1\x00"
_MESSAGE_LIMIT = 8
_PAIR_VALUE_CHARS = 256

# Building blocks (all literals lowercase: label patterns run over the lowercased text).
# _W joins label words; _WRAP is a quote (maybe JSON-escaped) or Markdown emphasis; _H is bounded
# horizontal space, so a value is never looked for on the next line.
_W = r"[_ -]?"
_WRAP = r"(?:\\?[\"'`]|\*{1,2})"
_H = r"[ \t]{0,16}"
_OPEN = rf"{_H}(?:{_WRAP}{_H})?"
# Before a value: a quote (with an optional Python string prefix: b'…', r"…") or Markdown emphasis.
_OPEN_VALUE = rf"{_H}(?:(?P<quote>[bruf]{{0,2}}\\?[\"'`])|\*{{1,2}})?{_H}"
_PLACEHOLDER = r"(?:\[REDACTED\]|<REDACTED>|\[已脱敏\])"
_TRAILING = r"[,;.)}\]]*"

_CREDENTIAL = re.compile(
    rf"(?P<label>api{_W}keys?|access{_W}tokens?|refresh{_W}tokens?|auth{_W}tokens?|passwords?|passwd"
    rf"|passphrase|cookies?|session{_W}secrets?|client{_W}secrets?|secret{_W}(?:access{_W})?keys?"
    rf"|private{_W}keys?|recovery{_W}codes?|助记词|密码|私钥|(?P<generic>(?:[a-z0-9]{{1,24}}+_){{1,6}}(?:secret|token)s?))"
    rf"{_OPEN}(?P<sep>:=|=>|[:：]|=(?!=)){_OPEN_VALUE}(?P<value>[^\s\"'`\\]{{0,256}})")
_AUTHORIZATION = re.compile(
    rf"authorization{_OPEN}[:=]{_OPEN}(?:bearer|basic)[ \t]{{1,16}}(?P<labelled>[a-z0-9._~+/-]{{12,512}}={{0,2}})"
    r"|(?:bearer|basic)[ \t]{1,16}(?P<bare>[a-z0-9._~+/-]{12,512}={0,2})")
_GOV_ID_LABELLED = re.compile(
    rf"(?:身份证(?:号码|号)?|公民身份号码){_H}[:：]?{_H}(?P<id>[0-9]{{7,17}}[0-9x])(?![0-9a-z])")
# Every top-level branch starts with a literal so that the engine can skip ahead (2-3x faster).
_PHONE = re.compile(
    "(?:" + "|".join(rf"{word}(?:{_W}(?:number|no\.?|\#))?" for word in (
        "phone", "mobile", rf"cell(?:{_W}phone)?", "tel(?:ephone)?", "whatsapp"))
    + rf"|电话(?:号码)?|手机(?:号码|号)?|联系电话|联系方式){_OPEN}(?:[:：=]{_OPEN})?"
    + r"(?P<number>\+?\(?[0-9](?:[ ().-]{0,2}[0-9]){6,16})(?![0-9])")
_CARD_LABELLED = re.compile(
    "(?:" + "|".join(rf"{word}{_W}card(?:{_W}(?:number|no\.?|num))?" for word in ("credit", "debit", "bank"))
    + rf"|card{_W}(?:number|no\.?|num)|cc(?:{_W}(?:number|no\.?|num)|\#)|卡号|信用卡号?|银行卡号?|借记卡号?)"
    + rf"{_OPEN}(?:[:：=#]{_OPEN})?(?P<number>[0-9](?:[ -]?[0-9]){{11,18}})(?![0-9])")
_ADDRESS = re.compile(
    "(?:" + "|".join(rf"{word}{_W}address(?:es)?" for word in (
        "home", "street", "mailing", "postal", "residential", "shipping", "billing"))
    + rf"|家庭地址|家庭住址|完整住址|居住地址|收货地址|通讯地址|通信地址|住址){_OPEN}[:：=]{_OPEN}"
    + r"(?P<value>[^\s\"'`\\][^\n\"`\\]{0,199})?")
_PRIVATE_CONVERSATION = re.compile(r"full[ \t]{1,16}private[ \t]{1,16}(?:chat|conversation)s?(?![a-z])|完整私聊|完整私人对话")

_PRIVATE_KEY = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[nr]){0,8}[A-Za-z0-9+/=]{0,64}")
_CREDENTIAL_URL = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://(?P<userinfo>[^\s/:@?#\"'<>]{0,256}"
    r":(?P<password>[^\s/@?\"'<>]{1,256}))@(?P<host>[^\s/@?#\"'<>:]{1,256})")
_TOKEN_PREFIX = re.compile(
    r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}"
    r"|(?P<openai>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,512})|(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|glpat-[A-Za-z0-9_-]{20,255}|(?P<slack>xox[abprs]-[A-Za-z0-9-]{10,255})|AIza[0-9A-Za-z_-]{35}"
    r"|[sr]k_live_[A-Za-z0-9]{20,255}|eyJ[A-Za-z0-9_-]{8,2048}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,2048})")
# Digit-led so that the engine can skip ahead; the left boundary is checked in Python.
_GOV_ID_18 = re.compile(
    r"[1-9][0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9Xx](?![0-9A-Za-z])")
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])(?P<local>[A-Za-z0-9._%+-]{1,64})@"
    r"(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,16}[A-Za-z]{2,24})(?![A-Za-z0-9-])")
_UUID = re.compile(
    r"(?<![0-9A-Fa-f-])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f-])")
# A maximal digit run not glued to a word, a sign or a decimal/thousands separator; digit-led
# (lookbehinds after the first digit) so that the engine can skip ahead to digits.
_ID_LABEL = re.compile(r"(?i)(?:id|trace|span|request|order|invoice|build|epoch|timestamp|ts)[ \t]*[=:#][ \t]*$")
_DIGIT_GROUP = re.compile(
    r"[0-9](?<![A-Za-z0-9_+][0-9])(?<![^0-9]-[0-9])(?<!^-[0-9])(?<![0-9][.,][0-9])[0-9]*(?![A-Za-z0-9_])(?![.,][0-9])")

# Values that hold no secret wherever they appear, and those that are code when unquoted.
_NOT_A_VALUE = re.compile(
    rf"(?:{_PLACEHOLDER}|\$[A-Za-z_]\w*|\$\{{[A-Za-z_]\w*\}}|%[A-Za-z_]\w*%|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
    r"|<[A-Za-z][\w.-]{0,63}>|(?i:your[-_][\w-]{1,40}|[\w-]{1,40}[-_]here)"
    r"|\*+|•+|●+|x{3,}|X{3,}|…|(?:%[sdrx]|%\(\w+\)[sdrx]|\{[\w.!:]*\}|\$?\{\{.*|[^\w])++)"
    rf"{_TRAILING}")
_CODE_VALUE = re.compile(
    r"(?:None|null|NULL|nil|undefined|true|false|True|False|str|string|String|bytes|SecretStr|Optional\[str\]"
    r"|\[\]|\{\}|\(\)|(?:os\.environ|os\.getenv|process\.env|import\.meta\.env)\b.*|[A-Za-z_][\w.]*[(\[].*)"
    rf"{_TRAILING}")
_BENIGN_URL_PASSWORD = re.compile(
    rf"(?:{_PLACEHOLDER}|\$[A-Za-z_]\w*|\$\{{[A-Za-z_]\w*\}}|%[A-Za-z_]\w*%|\*+|x{{3,}}|X{{3,}})")
_PLACEHOLDER_VALUE = re.compile(rf"{_PLACEHOLDER}{_TRAILING}")
_ATTRIBUTE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_CREDENTIAL_WORD = re.compile(r"pass|pwd|secret|token|key|cookie|cred|auth", re.I)
_LABEL_SPACING = re.compile(r"[_ -]")
_PEM_SPACING = re.compile(r"\s|\\[nr]")

_RESERVED_EMAIL_DOMAINS = ("example.com", "example.net", "example.org")
_RESERVED_EMAIL_SUFFIXES = (".example", ".test", ".invalid", ".localhost")
_GB11643_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_GB11643_CHECK = "10X98765432"
_CARD_LEADING_DIGITS = frozenset("234569")
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}

Finding = tuple[int, str, str]  # (offset, rule id, normalised core that is fingerprinted)


class Violation(namedtuple("Violation", "rule_id field_path fingerprint")):
    """One rule hit: which rule, where (JSON pointer), and an irreversible fingerprint."""

    __slots__ = ()

    def as_dict(self) -> dict[str, str]:
        return {"rule_id": self.rule_id, "field_path": self.field_path, "fingerprint": self.fingerprint}


class SensitiveContentError(CmError):
    """Content failed the scanner; ``violations`` says which rules fired where, never what matched."""

    def __init__(self, violations: list[Violation]) -> None:
        shown = ", ".join(f"{v.rule_id} at {v.field_path or '(root)'}" for v in violations[:_MESSAGE_LIMIT])
        if len(violations) > _MESSAGE_LIMIT:
            shown += f" and {len(violations) - _MESSAGE_LIMIT} more"
        super().__init__("SENSITIVE_CONTENT_REJECTED",
                         f"sensitive content found ({shown}); remove or redact it and try again")
        self.violations = tuple(violations)


class _Settings:
    """The process's detector: deep scan on or off, and where the allow-list lives."""

    deep = False
    home: str | None = None
    allowed: frozenset[str] = frozenset()
    stamp: tuple[int, int] | None = None


def configure(home: str | None, deep: bool = True) -> None:
    """Set this process's detector: the maintained detector on or off, the home's allow-list."""
    _Settings.deep, _Settings.home, _Settings.allowed, _Settings.stamp = deep, home, frozenset(), None


def deep_scanner_version() -> str | None:
    """The installed maintained detector's version (detect-secrets), or None when it is unavailable."""
    from cmrunner.secrets import _deepscan

    return _deepscan.version()


def allowed() -> frozenset[str]:
    """The configured home's allowed fingerprints, re-read when the file changes."""
    if _Settings.home is None:
        return frozenset()
    from cmrunner.secrets import allowlist

    try:
        info = os.stat(allowlist.path(_Settings.home))
        stamp = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = (0, 0)
    if stamp != _Settings.stamp:
        _Settings.allowed = allowlist.load(_Settings.home) if stamp != (0, 0) else frozenset()
        _Settings.stamp = stamp
    return _Settings.allowed


def fingerprint(rule_id: str, core: str) -> str:
    """First 16 hex digits of a domain-separated sha256 over the rule id and the hit's core."""
    digest = hashlib.sha256(_FINGERPRINT_DOMAIN + rule_id.encode() + b"\x00" + core.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def preview(text: str, mark: str, deep: bool = True) -> str | None:
    """The matched span of the finding whose fingerprint is ``mark`` in ``text``, masked: its first and last
    characters and its length (``w…2 (38)``); all masked when it is 6 characters or fewer.
    For the user's own terminal (``cm secrets list``) only: never logged, stored or sent."""
    for _, rule_id, core in findings(text, deep):
        if fingerprint(rule_id, core) == mark:
            shown = "…" if len(core) <= 6 else f"{core[0]}…{core[-1]}"
            return f"{shown} ({len(core)})"
    return None


def scan_text(text: str, field_path: str = "", *, deep: bool | None = None) -> list[Violation]:
    """Every violation in ``text``, reported at ``field_path`` (``deep``: default of ``configure``)."""
    return _violations(findings(text, _Settings.deep if deep is None else deep), field_path)


def scan_value(obj: object, path: str = "", *, deep: bool | None = None) -> list[Violation]:
    """Every violation in a JSON-like value: string values, integers and every object key."""
    deep = _Settings.deep if deep is None else deep
    found: list[Violation] = []
    seen: set[Violation] = set()
    # Each entry carries the violations of its own key (and key/value pairing), emitted before
    # the value's so that the result follows document order.
    stack: list[tuple[object, str, list[Violation]]] = [(obj, path, [])]
    while stack:
        node, here, before = stack.pop()
        new = list(before)
        children: list[tuple[object, str, list[Violation]]] = []
        if isinstance(node, dict):
            for ordinal, (key, value) in enumerate(node.items()):
                name = key if isinstance(key, str) else str(key)
                key_hits = findings(name, deep)
                child = f"{here}/~redacted-key-{ordinal}" if key_hits else f"{here}/{_pointer_segment(name)}"
                pair_hits = [] if key_hits else _pair_findings(name, value)
                children.append((value, child, _violations(key_hits, child) + _violations(pair_hits, child)))
        elif isinstance(node, (list, tuple)):
            children = [(item, f"{here}/{index}", []) for index, item in enumerate(node)]
        else:
            text = _scalar_text(node)
            if text:
                new += scan_text(text, here, deep=deep)
        for violation in new:
            if violation not in seen:
                seen.add(violation)
                found.append(violation)
        stack.extend(reversed(children))
    return found


def require_clean(obj: object, path: str = "", *, deep: bool | None = None) -> None:
    """Raise ``SensitiveContentError`` if ``obj`` has any violation."""
    violations = scan_value(obj, path, deep=deep)
    if violations:
        raise SensitiveContentError(violations)


def _scalar_text(node: object) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, bool):
        return ""
    if isinstance(node, int):
        try:
            return str(node)
        except ValueError:  # beyond sys.get_int_max_str_digits(): not a number a person writes
            return ""
    if isinstance(node, (bytes, bytearray)):
        return bytes(node).decode("utf-8", "replace")
    return ""


def _pointer_segment(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _violations(found: list[Finding], field_path: str) -> list[Violation]:
    result: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    allow = allowed()
    for _, rule_id, core in sorted(found, key=lambda f: (f[0], _RANK[f[1]])):
        mark = fingerprint(rule_id, core)
        if mark in allow:
            continue
        if (rule_id, mark) not in seen:
            seen.add((rule_id, mark))
            result.append(Violation(rule_id, field_path, mark))
    return result


def findings(text: str, deep: bool = False) -> list[Finding]:
    """Every ``(offset, rule id, core)`` in ``text``: folded, then every rule (see the contract)."""
    text = _textnorm.fold(text)
    found = _rule_findings(text)
    found += _rules.provider_findings(text) + _rules.prose_findings(text)
    found += _rules.entropy_findings(text) + _forms.form_findings(text)
    found += _spaced_findings(text)
    if "*" in text or "`" in text or "<!--" in text or "~~" in text:
        # A token found again once markup is dropped is the same token (reported once, by the plain scan).
        plain = [(rule, core) for _, rule, core in found if rule in SECRET_RULES]
        found += [hit for hit in _unmarked_findings(text) if not any(rule == hit[1] and core in hit[2]
                                                                     for rule, core in plain)]
    if deep:
        from cmrunner.secrets import _deepscan

        found += _deepscan.findings(text)
    return _without_overlaps(found)


def _spaced_findings(text: str) -> list[Finding]:
    """A known prefix and its groups (``ghp_ AbC1 dEf2 …``), compacted and read again by the token rules."""
    hits: list[Finding] = []
    for at, compact in _forms.spaced_candidates(text):
        found = [(m.start(), "secret.token_prefix", m.group()) for m in _TOKEN_PREFIX.finditer(compact)
                 if _plausible_token(m)] + _rules.provider_findings(compact)
        hits += [(at, rule, core) for offset, rule, core in found if offset == 0]
    return hits


def _unmarked_findings(text: str) -> list[Finding]:
    """Token hits of each line read without its inline markup (a key broken up by ``**`` or backticks)."""
    hits: list[Finding] = []
    for at, line in _textnorm.unmarked(text):
        found = [(m.start(), "secret.token_prefix", m.group()) for m in _TOKEN_PREFIX.finditer(line)
                 if _plausible_token(m)]
        found += _rules.provider_findings(line) + _rules.entropy_findings(line)
        hits += [(at + offset, rule, core) for offset, rule, core in found]
    return hits


def _without_overlaps(found: list[Finding]) -> list[Finding]:
    """An entropy or deep hit inside another rule's hit is that rule's (reported once, by it)."""
    owned = [core for _, rule, core in found if rule not in ("secret.high_entropy", "secret.known_format")]
    if not owned or len(owned) == len(found):
        return found
    return [f for f in found if f[1] not in ("secret.high_entropy", "secret.known_format")
            or not any(f[2] in core or core in f[2] for core in owned)]


def _rule_findings(text: str) -> list[Finding]:
    found = _labelled_findings(text)
    if "-----" in text:
        found += [(m.start(), "secret.private_key", _PEM_SPACING.sub("", m.group()))
                  for m in _PRIVATE_KEY.finditer(text)]
    url_spans: list[tuple[int, int]] = []
    if "://" in text:
        for m in _CREDENTIAL_URL.finditer(text):
            if not _BENIGN_URL_PASSWORD.fullmatch(m.group("password")):
                url_spans.append(m.span())
                core = m.group("userinfo") + "@" + m.group("host").lower()
                found.append((m.start(), "secret.credential_url", core))
    found += [(m.start(), "secret.token_prefix", m.group()) for m in _TOKEN_PREFIX.finditer(text)
              if _plausible_token(m)]
    if "@" in text:
        found += [(m.start(), "identity.email", m.group().lower()) for m in _EMAIL.finditer(text)
                  if _personal_email(m.group("local"), m.group("domain"))
                  and text[max(0, m.start() - 2):m.start()] != "//"
                  and not any(start <= m.start() < end for start, end in url_spans)]
    ids = set()
    for m in _GOV_ID_18.finditer(text):
        before = text[m.start() - 1] if m.start() else " "
        if not (before.isascii() and before.isalnum()) and _gb11643_valid(m.group()):
            ids.add(m.group())
            found.append((m.start(), "identity.government_id", m.group().upper()))
    found += [card for card in _card_findings(text) if card[2] not in ids]
    return found


def _labelled_findings(text: str) -> list[Finding]:
    """Hits of the rules that need a label (also run over object members as ``key: value``)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters lowercase to two; keep the offsets aligned
        lowered = text.translate(_ASCII_LOWER)
    found: list[Finding] = []
    for pattern, handle in _LABELLED_RULES:
        m = pattern.search(lowered)
        while m is not None:
            at = m.start()
            if _starts_label(text, at):
                finding = handle(m, text)
                if finding is not None:
                    found.append((at, *finding))
            # resume at the next offset, not past the hit: in "mypassword: password: s3cret" the
            # first match is no label (no word start) but a real one starts inside it
            m = pattern.search(lowered, at + 1)
    return found


def _starts_label(text: str, at: int) -> bool:
    """A latin label starts a word or a camelCase hump; a CJK label starts anywhere."""
    first = text[at]
    if at == 0 or not (first.isascii() and first.isalpha()):
        return True
    before = text[at - 1]
    return not (before.isascii() and before.isalnum()) or (before.islower() and first.isupper())


def _group(m: re.Match[str], text: str, name: str) -> str:
    """A group of a match over the lowercased copy, read from the original text."""
    start, end = m.span(name)
    return text[start:end] if start >= 0 else ""


def _credential(m: re.Match[str], text: str) -> tuple[str, str] | None:
    value = _group(m, text, "value")
    if _benign_credential(value, _group(m, text, "label"), m.group("sep"), m.group("quote") is not None):
        return None
    if m.group("generic") is not None and not _secret_like(value):
        return None  # ``next_page_token: first``, ``csrf_token = form``: names, not secrets
    return ("secret.credential", value.rstrip(",;"))


def _authorization(m: re.Match[str], text: str) -> tuple[str, str] | None:
    if m.group("labelled") is not None:
        return ("secret.authorization_header", _group(m, text, "labelled"))
    token = _group(m, text, "bare")
    return ("secret.authorization_header", token) if _mixes_letters_and_digits(token) else None


def _labelled_id(m: re.Match[str], text: str) -> tuple[str, str] | None:
    return ("identity.government_id", m.group("id").upper())


def _phone(m: re.Match[str], text: str) -> tuple[str, str] | None:
    number = m.group("number")
    digits = "".join(ch for ch in number if "0" <= ch <= "9")
    if not 7 <= len(digits) <= 15:
        return None
    return ("identity.phone", ("+" if number.startswith("+") else "") + digits)


def _labelled_card(m: re.Match[str], text: str) -> tuple[str, str] | None:
    digits = m.group("number").replace(" ", "").replace("-", "")
    if digits.count(digits[0]) == len(digits):
        return None
    return ("payment.card", digits)


def _address(m: re.Match[str], text: str) -> tuple[str, str] | None:
    value = _group(m, text, "value").strip()
    if not value or _PLACEHOLDER_VALUE.fullmatch(value):
        return None
    return ("address.full", value)


def _private_conversation(m: re.Match[str], text: str) -> tuple[str, str] | None:
    return ("content.private_conversation", " ".join(m.group().split()))


_LABELLED_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], str], tuple[str, str] | None]], ...] = (
    (_CREDENTIAL, _credential), (_AUTHORIZATION, _authorization), (_GOV_ID_LABELLED, _labelled_id),
    (_PHONE, _phone), (_CARD_LABELLED, _labelled_card), (_ADDRESS, _address),
    (_PRIVATE_CONVERSATION, _private_conversation),
)


def _pair_findings(key: str, value: object) -> list[Finding]:
    """Labelled hits of an object member read as ``key: value``; a key alone is just a name."""
    text = _scalar_text(value) if isinstance(value, (str, int)) else ""
    if not text:
        return []
    line = _textnorm.fold(f"{key}: {text[:_PAIR_VALUE_CHARS]}")
    return [finding for finding in _labelled_findings(line) if finding[0] < len(key)]


def _benign_credential(value: str, label: str, separator: str, quoted: bool) -> bool:
    """True when a labelled value cannot be a secret (see the module docstring)."""
    if len(value) < 2 or _NOT_A_VALUE.fullmatch(value):
        return True
    if quoted or "REDACTED" in value or "已脱敏" in value:  # quoted: data, not code; or partly redacted
        return False
    if _CODE_VALUE.fullmatch(value):
        return True
    bare = value.rstrip(",;)]}")
    if not _ATTRIBUTE_PATH.fullmatch(bare):
        return False
    last = bare.rsplit(".", 1)[-1]
    if "." in bare and _CREDENTIAL_WORD.search(last):
        return True
    # Only `=` passes a variable along (a keyword argument); `password: password` is a real value.
    same_name = _LABEL_SPACING.sub("", last).lower() == _LABEL_SPACING.sub("", label).lower()
    return separator == "=" and same_name


def _secret_like(value: str) -> bool:
    """At least 8 characters and not one plain word: what a value under a generic ``*_SECRET`` / ``*_TOKEN`` name needs."""
    return len(value) >= 8 and not (value.isalpha() and (value.islower() or value.isupper()))


def _mixes_letters_and_digits(token: str) -> bool:
    return any(ch.isdigit() for ch in token) and any(ch.isalpha() for ch in token)


def _plausible_token(m: re.Match[str]) -> bool:
    if m.group("openai") is not None:
        segments = m.group()[3:].replace("_", "-").split("-")
        return any(len(part) >= 16 and _mixes_letters_and_digits(part) for part in segments)
    if m.group("slack") is not None:
        return any(ch.isdigit() for ch in m.group())
    return True


def _personal_email(local: str, domain: str) -> bool:
    domain = domain.lower()
    if local.lower() == "git" or domain in _RESERVED_EMAIL_DOMAINS:
        return False
    return not domain.endswith(_RESERVED_EMAIL_SUFFIXES)


def _gb11643_valid(number: str) -> bool:
    """GB 11643 citizen ID: a real birth date and the ISO 7064 MOD 11-2 check character."""
    year, month, day = int(number[6:10]), int(number[10:12]), int(number[12:14])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day > (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]:
        return False
    total = sum(int(digit) * weight for digit, weight in zip(number[:17], _GB11643_WEIGHTS))
    return _GB11643_CHECK[total % 11] == number[17].upper()


def _starts_with_date(digits: str) -> bool:
    """A compact timestamp (20YYMMDD…); no payment network issues numbers starting with 20."""
    return digits[:2] == "20" and "01" <= digits[4:6] <= "12" and "01" <= digits[6:8] <= "31"


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_findings(text: str) -> list[Finding]:
    """Unlabelled card numbers: Luhn-valid windows of whole digit groups (see the docstring)."""
    candidates: list[Finding] = []
    chain: list[tuple[int, str]] = []
    last_end = -2
    for m in _DIGIT_GROUP.finditer(text):
        group = m.group()
        usable = 3 <= len(group) <= 19
        if not usable or m.start() != last_end + 1 or text[last_end] not in " -":
            candidates += _luhn_windows(chain)
            chain = []
        if usable:
            chain.append((m.start(), group))
        last_end = m.end()
    candidates += _luhn_windows(chain)
    if not candidates:
        return []
    # Rare, so UUIDs are looked for only now; a window that touches one is dropped, and so is a
    # number that an id label names (``trace_id=9919…``: 19-digit ids pass Luhn one time in ten).
    uuids = [m.span() for m in _UUID.finditer(text)]
    return [(start, rule, digits) for start, rule, digits in candidates
            if not any(start < end and begin < _window_end(text, start, digits) for begin, end in uuids)
            and _ID_LABEL.search(text, max(0, start - 24), start) is None]


def _window_end(text: str, start: int, digits: str) -> int:
    """Offset just past the window that starts at ``start`` and holds ``digits``."""
    seen = 0
    for offset in range(start, len(text)):
        if "0" <= text[offset] <= "9":
            seen += 1
            if seen == len(digits):
                return offset + 1
    return len(text)


def _luhn_windows(chain: list[tuple[int, str]]) -> list[Finding]:
    windows: list[Finding] = []
    for first in range(len(chain)):
        digits = ""
        for index in range(first, len(chain)):  # no slicing: the break keeps this linear
            digits += chain[index][1]
            if len(digits) > 19:
                break
            if (len(digits) >= 13 and digits[0] in _CARD_LEADING_DIGITS and not _starts_with_date(digits)
                    and digits.count(digits[0]) != len(digits) and _luhn_valid(digits)):
                windows.append((chain[first][0], "payment.card", digits))
    return windows
