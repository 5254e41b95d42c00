"""Token estimates for requests whose provider reported no usable usage.

Contract:
- ``estimate(data)`` returns ``(tokens, source)``: the count of the ``o200k_base`` encoding (the
  one OpenAI's current models use) from the ``bpe-openai`` package, whose wheel carries the
  encodings, so nothing is fetched at run time, and source ``o200k_base``; if that package cannot
  load, ``ceil(bytes / 4)`` and source ``bytes/4`` (about four bytes per token for English text
  and JSON). Special-token text is counted as ordinary text.
- The encoding is loaded once per process, on the first estimate (about 1.4 s here), so a drain
  whose provider reports usage never pays for it. Never imported on a hook path.
Why not tiktoken: it downloads its encoding files on first use, which cm may not do.
"""

from __future__ import annotations

import math
import threading

BYTES_SOURCE = "bytes/4"
ENCODING = "o200k_base"

_lock = threading.Lock()
_encoder: object | None = None
_loaded = False


def _load() -> object | None:
    global _encoder, _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            try:
                import bpe_openai

                _encoder = bpe_openai.get_encoding(ENCODING)
            except Exception:  # not installed, or its data did not load: the bytes rule stands in
                _encoder = None
    return _encoder


def estimate(data: bytes) -> tuple[int, str]:
    """Tokens in ``data`` (UTF-8) and the name of the method that counted them."""
    if not data:
        return 0, BYTES_SOURCE
    encoder = _load()
    if encoder is not None:
        try:
            return len(encoder.encode_ordinary(data.decode("utf-8", "replace"))), ENCODING  # type: ignore[attr-defined]
        except Exception:
            pass
    return math.ceil(len(data) / 4), BYTES_SOURCE
