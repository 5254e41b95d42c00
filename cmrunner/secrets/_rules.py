"""The secret rules that need no label: provider key formats, high-entropy tokens, prose passwords.

Contract
- ``provider_findings(text)``: well-known provider token formats beyond the reference's prefixes
  (rule ``secret.token_prefix``): Slack (incl. app tokens and webhook URLs), Stripe secret,
  restricted and webhook keys, GitLab personal/deploy/runner tokens, Google OAuth access tokens and
  client secrets, Twilio API key SIDs, SendGrid, npm, PyPI, Hugging Face, Mailgun, Mailchimp,
  Discord bot tokens, Telegram bot tokens, DigitalOcean, Shopify, Square, Databricks, Postman,
  HashiCorp Vault, Doppler, Grafana, Linear, Notion, age secret keys, Azure storage account keys;
  and (issue 32, ``_PROVIDER_MORE``) about sixty more from the format lists gitleaks and TruffleHog
  publish (GitLab's newer kinds, Groq, Perplexity, xAI, Replicate, LangSmith, Docker Hub, RubyGems,
  Clojars, Terraform Cloud, Atlassian, Airtable, Alibaba, Dynatrace, Heroku, HubSpot, New Relic,
  PlanetScale, Pulumi, Sentry, Tailscale, Supabase, Netlify, Figma, Buildkite, CircleCI, Cloudflare
  origin CA, Azure AD client secrets, Pinecone, 1Password service accounts, ...). Any other token of
  the modern shape ``<lower-case prefix>_<tail>`` counts when the tail is 30+ characters and
  random-looking (``random_looking``) and it is no id shape (``_ID_SHAPE``).
  Case-sensitive, never inside a longer token.
- ``entropy_findings(text)`` (rule ``secret.high_entropy``): keyword-anchored, as maintained
  scanners' generic rules are (gitleaks' generic-api-key): a random-looking token counts only when
  a credential keyword (key, secret, token, password, credential(s), creds, auth, bearer, cookie, signing;
  a word or the last part of an identifier such as ``aws_secret_access_key``, never a host or path
  part like ``auth.svc``) leads to it on the same line with at most a few words, an operator and
  quotes in between (``_BETWEEN``) and no id word (sha, commit, request, trace, id, ...), or names
  it right after (``<token> as the deploy credential``). A bare random token with no keyword is
  not a finding: developer memory is full of them (KSUIDs, nanoids, provider object ids, base64
  digests), and a key with a known format is caught by its prefix anyway. Random-looking: 20..1024
  characters of the base64/base64url alphabet mixing upper case, lower case and digits, Shannon
  entropy at least ``ENTROPY_BITS[len]`` (about the 1st percentile of random strings of that
  length), letter/digit classes changing often (``MIN_SWITCH_RATIO``), not made of words
  (``MAX_WORDLIKE``); or hex / lower-case alphanumeric of 32+ characters. Never a finding: UUIDs,
  Stripe object ids and AWS resource ids (``_ID_SHAPE``), ``sec_`` refs, ``sha256:``-style
  digests, ``data:…;base64,`` payloads, URLs' paths, file paths, tokens other rules own.
- ``provider_findings`` also reads a GitHub token written in groups of four on one line
  (``ghp_AbC1 dEf2 …``, one separator kind), and Doppler tokens with their environment segment.
- ``prose_findings(text)`` (rule ``secret.credential``): "my password is X", "pw was X", "the
  passcode for the router is X", "api key is X", "the credentials are X", and the same in German,
  French, Spanish, Portuguese, Dutch and Russian (``Passwort … ist``, ``mot de passe … est``,
  ``contraseña … es``); Chinese, Japanese and Korean (``密码是X``, ``パスワードはXです``,
  ``비밀번호는 X``, the ASCII run after the particle); and ``.netrc`` lines (``machine … login …
  password X``). The value must be quoted, or hold a digit or a password symbol, or be a single
  word of 6+ letters that ends the sentence and is not a stop word ("the wifi password is
  sunflower"; "the password is managed by …" goes on and is prose).
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
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}|dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,}"
    r"|gl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}|lin_(?:api|oauth)_[A-Za-z0-9]{40}"
    r"|(?:secret|ntn)_[A-Za-z0-9]{43}(?![A-Za-z0-9])"
    r"|AGE-SECRET-KEY-1[0-9A-Z]{58}"
    r"|AccountKey=[A-Za-z0-9+/]{86}=="
    r")")
# More published formats (issue 32; prefixes, alphabets and lengths from gitleaks' and TruffleHog's format
# lists): GitLab's newer token kinds, AI providers, package registries, CI, hosting and SaaS keys.
_PROVIDER_MORE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"gl(?:cbt|imt|agent|oas|ffct)-[A-Za-z0-9_-]{20,}|xoxe(?:\.xox[bp])?-1-[A-Za-z0-9-]{100,}"
    r"|gsk_[A-Za-z0-9]{48,56}|pplx-[A-Za-z0-9]{40,56}|xai-[A-Za-z0-9]{60,90}|r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"
    r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|api_org_[A-Za-z]{34}(?![A-Za-z0-9])"
    r"|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}|rubygems_[a-f0-9]{48}|CLOJARS_[a-z0-9]{60}|dckr_pat_[A-Za-z0-9_-]{27}"
    r"|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}|ATATT3[A-Za-z0-9_=-]{150,}"
    r"|pat[A-Za-z0-9]{14}\.[a-f0-9]{64}|LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])|b_[A-Za-z0-9_=-]{44}(?![A-Za-z0-9_=-])"
    r"|dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}|duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"
    r"|dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}|EZ[AT]K[A-Za-z0-9]{54}|FLWSECK(?:_TEST)?-[a-h0-9]{32}-X"
    r"|fio-u-[A-Za-z0-9_=-]{64}|pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}"
    r"|HRKU-AA[A-Za-z0-9_-]{58}|pat-(?:na|eu)1-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|ico-[A-Za-z0-9]{32}|AKCp[A-Za-z0-9]{69}|NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}"
    r"|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}|pnu_[A-Za-z0-9]{36}|pul-[a-f0-9]{40}|rdme_[a-z0-9]{70}"
    r"|tk-us-[A-Za-z0-9_-]{48}|sntry[su]_[A-Za-z0-9+/=_]{64,}|shippo_(?:live|test)_[a-f0-9]{40}"
    r"|tfp_[A-Za-z0-9_.=-]{59}|sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}|fo1_[A-Za-z0-9_-]{43}"
    r"|tskey-(?:api|auth|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}|sbp_[a-f0-9]{40}|nfp_[A-Za-z0-9]{36}"
    r"|figd_[A-Za-z0-9_-]{40}|bkua_[a-f0-9]{40}|CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}|re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}"
    r"|CFPAT-[A-Za-z0-9_-]{43}|sl\.[A-Za-z0-9_=-]{130,152}|v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"
    r"|[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}|pcsk_[A-Za-z0-9]{5}_[A-Za-z0-9]{60,}"
    r"|ops_eyJ[A-Za-z0-9+/]{200,}={0,2}|sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}|ddp_[A-Za-z0-9]{36}"
    r")")
# Any other token of the modern shape ``<lower-case prefix>_<random tail>`` (most providers now publish one):
# the tail must be random-looking (``random_looking``) and 30+ characters, so ids such as ``req_…`` do not count.
_PREFIXED_GENERIC = re.compile(
    r"(?<![A-Za-z0-9_./+=-])(?P<prefix>[a-z][a-z0-9]{1,11}(?:_[a-z0-9]{2,8})?_)(?P<tail>[A-Za-z0-9][A-Za-z0-9_-]{29,255})"
    r"(?![A-Za-z0-9_./+=-])")
# A GitHub token typed or read out in groups of four (``ghp_AbC1 dEf2 …``): one line, one separator kind.
_GROUPED = re.compile(r"(?<![A-Za-z0-9_-])(gh[pousr]_)([A-Za-z0-9]{4}([ -])(?:[A-Za-z0-9]{4}\3){7}[A-Za-z0-9]{4})"
                      r"(?![A-Za-z0-9])")
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{20,}")
_HEX_OR_LOWER = re.compile(r"(?<![A-Za-z0-9_+/=-])[0-9a-z]{32,}(?![A-Za-z0-9_+/=-])|(?<![A-Za-z0-9_+/=-])"
                           r"[0-9A-F]{32,}(?![A-Za-z0-9_+/=-])")
# Keyword anchors of the generic rule (as maintained scanners do: gitleaks' generic-api-key keywords),
# as a word or the last part of an identifier (``aws_secret_access_key``, ``apiKey``), never a
# host or path part (``auth.svc``, ``kms key/…``).
_ANCHOR = re.compile(
    r"(?i)(?<![a-z0-9])(?:[a-z0-9]{1,24}+[_-]){0,6}(?:api_?keys?|keys?|secrets?|tokens?|passw(?:or)?ds?|passphrase|pwd"
    r"|credentials?|creds|auth|bearer|cookie|signing)(?![a-z0-9./-])")
# What may stand between the keyword and the value: a few word characters (``secret for prod``,
# ``token is``), then an operator and quotes, as in gitleaks' generic rule; a dash, slash or other
# punctuation in between means the value belongs to something else.
_BETWEEN = re.compile(r"[ \t\w.-]{0,24}[\s'\"]{0,3}(?:=|>|:{1,3}=|:|=>|,)?[\s`'\"=]{0,5}")
_ID_WORD = re.compile(
    r"(?i)(?:sha|hash|digest|commit|checksum|md5|etag|revision|\brev\b|fingerprint|integrity|\bids?\b|uuid|"
    r"build|object|blob|tree|oid|version|request|trace|span|correlation|cache)")
# The keyword right after the token: ``<token> as the deploy credential``, ``<token> is my api key``.
_NAMED_AFTER = re.compile(
    r"(?i)[ \t]{1,4}(?:is|as|was)[ \t]{1,4}(?:(?:the|my|our|a|an|your)[ \t]{1,4})?(?:[a-z]{1,16}[ \t]{1,4}){0,2}"
    r"(?:api[ \t_-]?key|key|secret|token|password|passphrase|credential)s?(?![a-z0-9])")
# Identifier shapes that are never secrets even after a keyword: Stripe object ids, AWS resource ids.
_ID_SHAPE = re.compile(
    r"(?:cus|pi|ch|sub|evt|in|price|prod|acct|req|txn|po|re|seti|src|pm|plan|ii|il|cs|file|ipi|pyr|tr|dp)"
    r"_[A-Za-z0-9]{8,}|(?:i|vpc|sg|subnet|ami|snap|vol|eni|igw|rtb|acl|nat|lt|eipalloc)-[0-9a-f]{8,17}")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_JWT_OR_KNOWN = re.compile(r"eyJ|gh[pousr]_|github_pat_|sk-|AKIA|ASIA|AIza|glpat-|xox")
_DIGEST_PREFIXES = ("base64,", "sha256:", "sha1:", "sha512:", "sha384:", "md5:", "sha256-", "sha384-", "sha512-", "ssh-rsa ", "ssh-ed25519 ",
                    "ssh-dss ", "nistp256 ", "nistp384 ", "nistp521 ")
_DIGIT = re.compile(r"[0-9]")
_LOWER_RUN = re.compile(r"[a-z]{4,}")
_PATH_SEGMENT = re.compile(r"[A-Za-z][a-z]*[0-9]{0,3}|[A-Z]{2,5}[0-9]{0,3}|[0-9]{1,4}|[a-z]+(?:[_-][a-z0-9]+)*")

_PASSWORD_WORD = (r"(?:pass(?:word|wd|phrase|code)s?|pwd?|api[ \t_-]?key|access[ \t_-]?key|secret(?:[ \t_-]key)?"
                  r"|token|credentials|creds|passwort|kennwort|mot[ \t]+de[ \t]+passe|contrase(?:ñ|n)a|clave|senha"
                  r"|wachtwoord|пароль)")
_COPULA = (r"(?:(?:is|was|are|were|has[ \t]+been|will[ \t]+be|ist|lautet|war|est|était|es|era|é|è|это)"
           r"(?:[ \t]+(?:now|(?:set|changed|reset)[ \t]+to|jetzt|maintenant|ahora))?"
           r"|(?:set|changed|reset)[ \t]+to)")
_CONTEXT_WORD = r"(?:for|of|to|on|at|in|für|fur|von|vom|zum|zur|der|den|des|dem|du|de|la|le|del|da|do|pour|para|di)"
_PROSE = re.compile(
    rf"(?i)(?<![A-Za-z0-9_]){_PASSWORD_WORD}(?:[ \t]+{_CONTEXT_WORD}(?:[ \t]+[^\s:=]+){{1,4}}?)?"
    rf"[ \t]+{_COPULA}[ \t]+(?P<quote>[\"'`“‘«])?(?P<value>[^\s\"'`“”‘’«»]{{1,256}})")
# Chinese, Japanese and Korean: the value follows the particle with or without a space, and ends
# where the ASCII ends (``密码是Tr0ub4dor，不要…``, ``パスワードはTr0ub4dorです``).
_PROSE_CJK = re.compile(
    r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호|암호)(?:[^\S\n]{0,4}(?:是|为|為|は|는|은)|[ \t]*[:：])[^\S\n]{0,4}"
    r"(?P<quote>[\"'`“‘「])?(?P<value>[!#-&(-_a-~]{1,256})")
# A .netrc line: the value follows the word ``password`` after a space.
_NETRC = re.compile(r"(?i)(?<![a-z0-9_])machine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<value>\S{2,256})")
_VALUE_TRAILING = ".,;:!?)]}"
_PASSWORD_SYMBOL = re.compile(r"[0-9@#$%^&*+=~|]")
_PROSE_STOPWORDS = frozenset(
    ["a", "an", "the", "not", "no", "required", "needed", "optional", "mandatory", "stored", "saved", "kept", "in", "on", "at", "of", "for", "my", "your", "our", "his", "her", "their", "its", "this", "that", "same", "different", "wrong", "correct", "incorrect", "invalid", "valid", "empty", "missing", "set", "unset", "expired", "changed", "reset", "hidden", "masked", "redacted", "secret", "private", "public", "weak", "strong", "long", "short", "too", "very", "still", "being", "managed", "rotated", "encrypted", "hashed", "sent", "shown", "visible", "there", "here", "what", "which", "where", "when", "how", "unknown", "temporary", "generated", "random", "unchanged", "configured", "updated", "removed", "deleted", "revoked", "leaked", "compromised", "enforced", "disabled", "enabled", "ignored", "forgotten", "lost", "available", "unavailable", "blank", "none", "null", "correct", "accepted", "rejected", "wrong", "working", "fine", "ok", "okay", "known", "elsewhere", "somewhere", "inside", "below", "above", "attached", "provided", "supplied", "included", "encoded", "stale", "outdated", "obsolete", "mandatory", "bitwarden", "vault", "keychain", "onepassword", "1password", "lastpass"])


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


def wordlike(token: str) -> float:
    """The share of ``token`` in runs of four or more lower-case letters (words, not random text)."""
    return sum(len(run) for run in _LOWER_RUN.findall(token)) / len(token)


def _is_path(token: str) -> bool:
    segments = [part for part in token.split("/") if part]
    return len(segments) >= 2 and all(_PATH_SEGMENT.fullmatch(part) for part in segments)


def provider_findings(text: str) -> list[Finding]:
    found = [(m.start(), "secret.token_prefix", m.group()) for m in _PROVIDER.finditer(text)]
    found += [(m.start(), "secret.token_prefix", m.group()) for m in _PROVIDER_MORE.finditer(text)]
    if "_" in text:
        found += [(m.start(), "secret.token_prefix", m.group()) for m in _PREFIXED_GENERIC.finditer(text)
                  if random_looking(m.group("tail")) and not _ID_SHAPE.fullmatch(m.group())]
    if "gh" in text:
        found += [(m.start(), "secret.token_prefix", m.group(1) + m.group(2).replace(m.group(3), ""))
                  for m in _GROUPED.finditer(text)]
    return found


def anchored(text: str, start: int, end: int) -> bool:
    """A credential keyword names the token at ``start:end`` on its line: before it, with only
    ``_BETWEEN`` and no id word in between; or just after it (``… as the deploy credential``)."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[max(line_start, start - 60):start]
    anchors = list(_ANCHOR.finditer(before))
    if anchors:
        between = before[anchors[-1].end():]
        if _BETWEEN.fullmatch(between) is not None and _ID_WORD.search(between) is None:
            return True
    return _NAMED_AFTER.match(text, end) is not None


def random_looking(token: str) -> bool:
    """The base64-alphabet test of ``entropy_findings`` for one token (see the module contract)."""
    core = token.rstrip("=")
    if not ENTROPY_MIN_LEN <= len(core) <= ENTROPY_MAX_LEN:
        return False
    # str methods first: they reject most tokens (words, paths, numbers) at C speed
    if core.lower() == core or core.upper() == core or _DIGIT.search(core) is None:
        return False
    if _is_path(core) or _switch_ratio(core) < MIN_SWITCH_RATIO or wordlike(core) > MAX_WORDLIKE:
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
        at = start + token.index(stripped) if stripped else start
        if random_looking(stripped) and not _ID_SHAPE.fullmatch(stripped) and anchored(text, at, at + len(stripped)):
            found.append((at, "secret.high_entropy", stripped))
    for m in _HEX_OR_LOWER.finditer(text):
        token = m.group()
        if token.isalpha() or not any(c.isalpha() for c in token):
            continue
        labelled = anchored(text, m.start(), m.end()) and not _UUID.search(text[max(0, m.start() - 1):m.end() + 1])
        if labelled and not (token.islower() and not _is_hex(token) and wordlike(token) > MAX_WORDLIKE):
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
    for pattern in (_PROSE, _PROSE_CJK):
        for m in pattern.finditer(text):
            value = _prose_value(text, m)
            if value is not None:
                found.append((m.start(), "secret.credential", value))
    if "machine" in text:
        found += [(m.start(), "secret.credential", m.group("value")) for m in _NETRC.finditer(text)
                  if not m.group("value").startswith(("$", "<", "*"))]
    return found


def _prose_value(text: str, m: re.Match[str]) -> str | None:
    """The password a prose match names, or None (see the module contract)."""
    value = m.group("value")
    quoted = m.group("quote") is not None
    if not quoted:
        value = value.rstrip(_VALUE_TRAILING)
    if len(value) < 4 or value.lower() in _PROSE_STOPWORDS:
        return None
    if quoted or _PASSWORD_SYMBOL.search(value):
        return value
    # An all-letter word counts only where it ends the sentence ("the wifi password is sunflower"):
    # "the password is managed by …" goes on, and is prose.
    end = text.find("\n", m.end())
    rest = text[m.end():end if end >= 0 else len(text)].strip()
    if len(value) >= 6 and value.isalpha() and value.isascii() and (not rest or rest[0] in ".;!,)"):
        return value
    return None
