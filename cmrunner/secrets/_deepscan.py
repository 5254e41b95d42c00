"""The maintained detector: detect-secrets' provider plugins, called from our scanner.

Contract
- ``findings(text)`` runs the regular-expression plugins of detect-secrets (1.5.x, Apache-2.0)
  over ``text`` (already folded by the caller) and returns ``(offset, "secret.known_format",
  value)`` for every value they report that stands as a whole token in ``text`` (their patterns
  have no boundaries, so ``AKIA…`` inside a longer word would count); the offset is its first
  standalone occurrence (for ordering).
  Its entropy and keyword plugins are not used (ours are stricter about prose; see
  ``_rules``), nor its public-IP and basic-auth plugins (an IP address is not a secret; our
  ``secret.credential_url`` tolerates placeholders such as ``${PGPASSWORD}``). Nothing is ever
  verified over the network: only ``analyze_string`` is called, never ``verify``.
- ``available()`` is False when detect-secrets cannot be imported; then ``findings`` returns ``[]``
  and ``cm doctor`` says so. The light rules keep scanning either way.
- Heavy (detect-secrets imports requests and yaml, about 130 ms): never imported on the hook or
  capture path. ``cmrunner.secrets.safety`` imports this module only for a deep scan, and the read path
  never asks for one (it reads the findings cache instead, see ``_cache``).
"""

from __future__ import annotations

import importlib
from typing import Any

RULE_ID = "secret.known_format"
_PLUGINS = (
    ("artifactory", "ArtifactoryDetector"), ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"), ("cloudant", "CloudantDetector"),
    ("discord", "DiscordBotTokenDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("ibm_cloud_iam", "IbmCloudIamDetector"),
    ("ibm_cos_hmac", "IbmCosHmacDetector"), ("jwt", "JwtTokenDetector"), ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"), ("openai", "OpenAIDetector"), ("private_key", "PrivateKeyDetector"),
    ("pypi_token", "PypiTokenDetector"), ("sendgrid", "SendGridDetector"), ("slack", "SlackDetector"),
    ("softlayer", "SoftlayerDetector"), ("square_oauth", "SquareOAuthDetector"), ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"), ("twilio", "TwilioKeyDetector"),
)
_loaded: list[Any] | None = None


def _plugins() -> list[Any]:
    global _loaded
    if _loaded is None:
        plugins = []
        try:
            for module, name in _PLUGINS:
                plugins.append(getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)())
        except (ImportError, AttributeError):
            plugins = []
        _loaded = plugins
    return _loaded


def available() -> bool:
    return bool(_plugins())


def version() -> str | None:
    """The installed detect-secrets version, or None."""
    if not available():
        return None
    try:
        from importlib.metadata import version as dist_version

        return dist_version("detect-secrets")
    except Exception:
        return "unknown"


def findings(text: str) -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for plugin in _plugins():
        for value in plugin.analyze_string(text):
            if not isinstance(value, str):
                continue
            value = value.strip(" \t\r\n\"'=:")  # some patterns capture the delimiters around a value
            if len(value) >= 8 and value not in seen:
                seen.add(value)
                offset = _standalone(text, value)
                if offset is not None:
                    found.append((offset, RULE_ID, value))
    return found


def _standalone(text: str, value: str) -> int | None:
    """Where ``value`` first stands as a whole token (the plugins' patterns have no boundaries)."""
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        if (at == 0 or not text[at - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
            return at
        at = text.find(value, at + 1)
    return None
