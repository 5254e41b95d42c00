"""Secret forms that are not one token: command lines, login pairs, key settings, connection strings, PEM bodies.

Contract (issue 32: the common forms a developer's notes hold that the token rules miss)
- ``form_findings(text)`` returns ``(offset, rule id, core)`` for:
  - ``secret.credential``, command lines: a password given as an argument to a client that takes one
    (``curl -u user:pw``, ``mysql -pPW``, ``sshpass -p PW``, ``docker login -p PW``, ``redis-cli -a``,
    ``mongosh -p``, ``smbclient -U user%pw``, ``openssl -passin pass:PW``, ``keytool -storepass``,
    ``htpasswd -b file user pw``, ``ldapsearch -w``, ``sqlcmd -P``) and the client password
    variables (``PGPASSWORD=``, ``MYSQL_PWD=``, ``SSHPASS=``, ``RSYNC_PASSWORD=``, ``REDISCLI_AUTH=``).
  - ``secret.credential``, login pairs in prose: ``admin / Tq8#vRm4Lz``, ``user X, pass Y``,
    ``username X and password Y``, ``as X with Y``, ``creds …: X:Y``. The password must look like one
    (``_password_like``: 8+ characters, a lower-case letter, a digit, and an upper-case letter or a
    symbol), so ``read / write`` and ``PLAT-12 / PLAT-14`` are prose.
  - ``secret.credential``, key settings: a name whose last parts say key, secret, signing, salt or
    pepper (``APP_KEY``, ``SIGNING_KEY``, ``signing_key:``, ``FERNET_KEY``) set to a random value:
    ``base64:`` + base64 (framework keys), 32+ hex digits, or a random-looking token of 16+ characters.
    Names that say the value is public or a reference (public, pub, id, arn, path, file, url, name,
    fingerprint, hash, type, ...) never count.
  - ``secret.credential``, connection strings: ``AccountKey=``, ``SharedAccessKey=``, ``sig=`` (SAS)
    with a base64 value of 20+ characters; a placeholder (``<key>``, ``$(VAR)``, ``{{ … }}``) is not one.
  - ``secret.private_key``, a PEM body without its BEGIN line: the DER start of a private key in
    base64 (PKCS#1 RSA/DSA, PKCS#8, SEC1 EC, OpenSSH ``openssh-key-v1``) as a token of 40+
    characters, or base64 lines right before ``-----END … PRIVATE KEY-----``. Certificates
    (``MII…gAwIBAgI``) and public keys are not private keys.
- ``spaced_candidates(text)``: a known token prefix followed by groups of 2-8 characters joined by one
  kind of separator (``ghp_ AbC1 dEf2 …``, ``AKIA ABCD EFGH …``), at least half of the groups holding
  an upper-case letter or a digit (words do not): ``(offset, compacted)`` to be read again by the
  token rules, which decide.
Stdlib only, every pattern compiled at import and literal-led or anchored on a short literal.
"""

from __future__ import annotations

import re

from cmrunner.secrets import _rules

Finding = tuple[int, str, str]

_Q = r"['\"`]?"
_VAL = r"(?P<value>[^\s'\"`]{1,256})"
# Each pattern with the words one of which a line must hold for it to apply (a cheap test first).
_CLI = tuple((needles, re.compile(pattern)) for needles, pattern in (
    (("curl",), rf"\bcurl\b[^\n]{{0,200}}?\s(?:-u|--user)(?:[ \t]+|=){_Q}[^\s:'\"`]{{0,64}}:{_VAL}"),
    (("mysql", "mariadb"), rf"\b(?:mysql|mysqldump|mysqladmin|mysqlsh|mariadb(?:-dump)?)\b[^\n]{{0,200}}?\s-p{_Q}(?P<value>[^\s'\"`]{{1,256}})"),
    (("sshpass",), rf"\bsshpass(?:[ \t]+-[vVe])*[ \t]+-p[ \t]*{_Q}{_VAL}"),
    (("login",), rf"\b(?:docker|podman|buildah|nerdctl|skopeo|helm[ \t]+registry|oras)[ \t]+login\b[^\n]{{0,200}}?\s(?:-p|--password)(?:[ \t]+|=){_Q}{_VAL}"),
    (("redis-cli",), rf"\bredis-cli\b[^\n]{{0,200}}?\s(?:-a|--pass)[ \t]+{_Q}{_VAL}"),
    (("mongo",), rf"\bmongo(?:sh|dump|restore|import|export)?\b[^\n]{{0,200}}?\s(?:-p|--password)(?:[ \t]+|=){_Q}{_VAL}"),
    (("smb", "rpcclient"), rf"\b(?:smbclient|rpcclient|smbmap|smbget)\b[^\n]{{0,200}}?\s-U[ \t]+{_Q}[^\s%'\"`]{{1,64}}%{_VAL}"),
    (("pass:",), rf"\s-pass(?:in|out)?[ \t]+{_Q}pass:{_VAL}"),
    (("storepass", "keypass"), rf"\s-(?:src|dest|new)?(?:store|key)pass[ \t]+{_Q}{_VAL}"),
    (("htpasswd",), rf"\bhtpasswd(?:[ \t]+-[a-zA-Z]+)*?[ \t]+-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+-[a-zA-Z]+)*[ \t]+\S+[ \t]+\S+[ \t]+{_Q}{_VAL}"),
    (("ldap",), rf"\bldap(?:search|modify|add|delete|whoami|passwd|compare)\b[^\n]{{0,200}}?\s-w[ \t]+{_Q}{_VAL}"),
    (("sqlcmd", "bcp", "mssql-cli"), rf"\b(?:sqlcmd|bcp|mssql-cli)\b[^\n]{{0,200}}?\s-P[ \t]+{_Q}{_VAL}"),
    (("PGPASS", "MYSQL_PWD", "SSHPASS", "RSYNC_PASSWORD", "REDISCLI_AUTH"), rf"\b(?:PGPASSWORD|MYSQL_PWD|SSHPASS|RSYNC_PASSWORD|REDISCLI_AUTH|PGPASS)={_Q}{_VAL}"),
))
# Not a password: a variable or command reference, a template, a mask, a word that names the thing.
_PLACEHOLDER = re.compile(
    r"\$[A-Za-z_{(].*|<.*|%[A-Za-z_]\w*%.*|%[sd]|\{\{.*|\{[\w.]*\}.*|-.*|\[.*|\(.*|@.*|\*+|…|\.\.\..*"
    r"|(?i:x{3,}|password|passwd|secret|changeme|redacted|your[-_].*|.*[-_]here|pass|prompt|stdin)")

_USER = r"(?P<user>[A-Za-z][\w.@+-]{0,39})"
_PW = r"(?P<value>[^\s'\"`,;]{6,64})"
# As _CLI: the words (lower-cased) one of which the text must hold.
_PAIR = tuple((needles, re.compile(pattern)) for needles, pattern in (
    ((" / ", "\t/"), rf"(?<![^\s(:>'\"`]){_USER}[ \t]+/[ \t]+{_PW}(?![^\s,;.)'\"`])"),
    (("pass", "pw"), rf"(?i:\b(?:user(?:name)?|login|account|acct)\b)[ \t]*[:=]?[ \t]*{_Q}{_USER}{_Q}[,;]?[ \t]+(?:(?i:and|&)[ \t]+)?" rf"(?i:pass(?:word)?|pw|pwd)\b[ \t]*[:=]?[ \t]*{_Q}{_PW}"),
    ((" as ",), rf"(?i:\bas)[ \t]+{_USER}[ \t]+(?i:with|using)[ \t]+(?:(?i:password|pw|pass)[ \t]+)?{_Q}{_PW}"),
    (("cred", "login", "account"), rf"(?i:\b(?:creds|credentials|login|account)\b)[^\n:]{{0,40}}:[ \t]*{_Q}[A-Za-z][\w.@+-]{{0,39}}:{_PW}"),
))
_PASSWORD_SYMBOLS = frozenset("!#$%&*+=?@^~_")

_KEY_SETTING = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:export[ \t]+)?(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,60})['\"]?[ \t]*(?::|=|:=)[ \t]*['\"`]?"
    r"(?P<value>base64:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/=_!@#$%^&*()~.-]{16,256})")
_KEY_WORD = re.compile(r"(?i)(?:^|[_.-])(?:key|secret|signing[a-z_]*|salt|pepper|seed|key_base)$|(?:Key|Secret|Salt)$")
_NOT_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:public|pub|publishable|id|ids|arn|path|file|url|uri|name|fingerprint|hash|type|size|len|length|"
    r"alg|algorithm|dir|prefix|version|region|header|field|column|cache|primary|foreign|sort|partition|index|ref)(?:[_.-]|$)"
    r"|(?:Id|Path|Name|Url|Type)(?:[_.-]|$)")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")

_CONNECTION = re.compile(
    r"(?:AccountKey|SharedAccessKey|SharedSecretValue|AccessKey)=(?P<value>[A-Za-z0-9+/]{20,}={0,2})"
    r"|[?&]sig=(?P<sig>(?:[A-Za-z0-9+/]|%2[BFbf]|%3[Dd]){20,})")

# The DER start of a private key, base64-encoded: PKCS#1 RSA/DSA (…IBAAK), PKCS#8 (…IBADANBgkqhkiG9w0BAQEFAAS,
# or EC: MIGHAgEAMBMGByqGSM49), PKCS#8 encrypted (…BgkqhkiG9w0BBQ0w), SEC1 EC (MHcCAQEE, MIGkAgEBBD),
# OpenSSH (base64 of "openssh-key-v1\0").
_DER_KEY = re.compile(
    r"(?<![A-Za-z0-9+/])(?:MII[A-Za-z0-9+/]{3}IBAAK[BC]|MII[A-Za-z0-9+/]{3}IBADANBgkqhkiG9w0BAQEFAAS"
    r"|MIGHAgEAMBMGByqGSM49|MII[A-Za-z0-9+/]{3}BJBgkqhkiG9w0BBQ0w|MHcCAQEE|MIGkAgEBBD|b3BlbnNzaC1rZXktdjEA)"
    r"[A-Za-z0-9+/]{24,}={0,2}")
_PEM_END = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_B64_LINE = re.compile(r"[ \t>*-]*`{0,3}[ \t]*([A-Za-z0-9+/]{40,}={0,2})[ \t]*\r?$")

_SPACED = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<head>gh[pousr]_|github_pat_|sk-(?:proj-|ant-api03-|ant-admin01-|or-v1-)?|AKIA|ASIA"
    r"|gl(?:pat|rt|cbt|ft|dt)-|xox[abpe]-|[sr]k_(?:live|test)_|npm_|gsk_|hf_|lin_(?:api_)?|dp\.|pypi-|SG\.|AIza|dop_v1_)"
    r"[ \t]?(?P<groups>[A-Za-z0-9_.-]{2,8}(?P<sep>[ \t]{1,2}|-)[A-Za-z0-9_.-]{2,8}(?:(?P=sep)[A-Za-z0-9_.-]{1,8}){0,64})"
    r"(?![A-Za-z0-9_.-])")


def _benign_value(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value) is not None


def _password_like(value: str) -> bool:
    """8+ characters with a lower-case letter, a digit, and an upper-case letter or a symbol."""
    if not 8 <= len(value) <= 64 or "/" in value or "://" in value:
        return False
    lower = any(c.islower() for c in value)
    digit = any(c.isdigit() for c in value)
    return lower and digit and (any(c.isupper() for c in value) or any(c in _PASSWORD_SYMBOLS for c in value))


def _cli(text: str) -> list[Finding]:
    found: list[Finding] = []
    for m in (m for needles, pattern in _CLI if any(n in text for n in needles) for m in pattern.finditer(text)):
        value = m.group("value").rstrip(".,;)")
        if len(value) >= 4 and not _benign_value(value):
            found.append((m.start(), "secret.credential", value))
    return found


def _pairs(text: str) -> list[Finding]:
    found: list[Finding] = []
    lowered = text.lower()
    for m in (m for needles, pattern in _PAIR if any(n in lowered for n in needles) for m in pattern.finditer(text)):
        value = m.group("value").rstrip(".,;:)")
        if _password_like(value) and not _benign_value(value) and not value.startswith(("http", "www.")):
            found.append((m.start(), "secret.credential", value))
    return found


def _key_settings(text: str) -> list[Finding]:
    found: list[Finding] = []
    for m in _KEY_SETTING.finditer(text):
        name, value = m.group("name"), m.group("value").rstrip(".,;")
        if _KEY_WORD.search(name) is None or _NOT_SECRET_NAME.search(name) is not None:
            continue
        core = value[len("base64:"):] if value.startswith("base64:") else value
        if value.startswith("base64:") or _HEX.fullmatch(core) and any(c.isalpha() for c in core) \
                and any(c.isdigit() for c in core) or _rules.random_looking(core.strip("=")[:1024]) \
                or _random_symbols(core):
            found.append((m.start(), "secret.credential", value))
    return found


def _random_symbols(value: str) -> bool:
    """A generated secret with symbols (Django's default key): 32+ characters with a digit, 3 classes, many
    distinct characters, not made of words (code such as ``winreg.OpenKey(winreg.HKEY_CURRENT_USER,``)."""
    if len(value) < 32 or not any(c.isdigit() for c in value) or _rules.wordlike(value) > _rules.MAX_WORDLIKE:
        return False
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value),
                   any(not c.isalnum() for c in value)))
    return classes >= 3 and len(set(value)) >= 20


def _connection(text: str) -> list[Finding]:
    found: list[Finding] = []
    for m in _CONNECTION.finditer(text):
        value = m.group("value") or m.group("sig")
        if any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value):
            found.append((m.start(), "secret.credential", value))
    return found


def _pem_bodies(text: str) -> list[Finding]:
    # inside a BEGIN … PRIVATE KEY block the header rule reports it
    found = [(m.start(), "secret.private_key", m.group()[:64]) for m in _DER_KEY.finditer(text)
             if not _in_pem_block(text, m.start())]
    if "-----END" in text:
        for m in _PEM_END.finditer(text):
            head = text.rfind("\n", 0, m.start())
            before = text[text.rfind("\n", 0, max(head, 0)) + 1:max(head, 0)]
            body = _B64_LINE.match(before)
            if head > 0 and body is not None and "-----BEGIN" not in text[max(0, head - 8192):head]:
                found.append((head, "secret.private_key", body.group(1)[:64]))
    return found


def _in_pem_block(text: str, at: int) -> bool:
    begin = text.rfind("-----BEGIN", max(0, at - 8192), at)
    return begin >= 0 and text.find("-----END", begin, at) < 0


def form_findings(text: str) -> list[Finding]:
    """Every finding of this module's forms in ``text`` (see the module contract)."""
    found = _cli(text) + _pairs(text) + _key_settings(text)
    if "=" in text:
        found += _connection(text)
    if "MI" in text or "MH" in text or "b3Bl" in text or "-----END" in text:
        found += _pem_bodies(text)
    return found


def spaced_candidates(text: str) -> list[tuple[int, str]]:
    """A known prefix and its groups, compacted (see the module contract)."""
    found: list[tuple[int, str]] = []
    for m in _SPACED.finditer(text):
        groups = m.group("groups").split(m.group("sep"))
        # words read as groups ("ghp_ followed by 36 …") are lower-case: a token's groups mostly are not
        if 2 * sum(any(c.isupper() or c.isdigit() for c in group) for group in groups) >= len(groups):
            found.append((m.start(), m.group("head") + "".join(groups)))
    return found
