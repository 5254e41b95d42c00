"""Token estimates for requests whose provider reported no usable usage.

Contract:
- ``estimate(data)`` returns ``(tokens, source)``: the count of the ``o200k_base`` encoding (the
  one OpenAI's current models use) from the Rust backend of the ``bpe-openai`` package, whose
  wheel carries the encodings, so nothing is fetched at run time, and source ``o200k_base``; if
  that backend cannot load, ``ceil(bytes / 4)`` and source ``bytes/4`` (about four bytes per token
  for English text and JSON). Special-token text is counted as ordinary text. ``rough(data)``
  is the bytes rule alone, for counts that must not load anything (``meter``: failed answers).
- The backend is loaded once per process, on the first estimate, so a drain whose provider
  reports usage never pays for it. Never imported on a hook path.
- Memory: only the backend's extension module is loaded (``_bindings``), never the package. The
  package's ``__init__`` decodes all three encodings it knows (o200k, cl100k, voyage3) into
  Python dictionaries at import, though the backend counts from its own copy: that import took
  143 MiB and 6 s in a bare interpreter here, kept for the process's life, and was most of the
  186 MiB a ``cm flush`` peaked at against a provider that kept failing (issue 22,
  ``bench/flush_memory.py``).
  The backend alone holds 67 MiB (half of it the extension's mapped data) and loads in 0.4 s;
  its counts equal the package's ``encode_ordinary`` (``tests/test_flush_memory.py``).
Why not tiktoken: it downloads its encoding files on first use, which cm may not do.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
import threading

BYTES_SOURCE = "bytes/4"
ENCODING = "o200k_base"
PACKAGE = "bpe_openai"

_lock = threading.Lock()
_encoder: object | None = None
_loaded = False


def _backend() -> object:
    """``bpe_openai._bindings`` loaded from its file, without running the package's ``__init__``."""
    spec = importlib.util.find_spec(PACKAGE)  # a top-level package's spec: nothing is imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(PACKAGE)
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, f"_bindings{suffix}")
            if os.path.isfile(path):
                found = importlib.util.spec_from_file_location(f"{PACKAGE}._bindings", path)
                if found is None or found.loader is None:
                    break
                module = importlib.util.module_from_spec(found)
                found.loader.exec_module(module)
                return module.tokenizer_for_encoding(ENCODING)
    raise ImportError(f"{PACKAGE}._bindings")


def _load() -> object | None:
    global _encoder, _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            try:
                _encoder = _backend()
            except Exception:  # not installed, or its data did not load: the bytes rule stands in
                _encoder = None
    return _encoder


def rough(data: bytes) -> tuple[int, str]:
    """The bytes rule alone (``ceil(bytes / 4)``): no tables loaded. Over this project's requests
    (JSON, English) it lands 2-3 % above the ``o200k_base`` count; it undercounts text in scripts
    that take more bytes per token (CJK)."""
    return math.ceil(len(data) / 4), BYTES_SOURCE


def estimate(data: bytes) -> tuple[int, str]:
    """Tokens in ``data`` (UTF-8) and the name of the method that counted them."""
    if not data:
        return 0, BYTES_SOURCE
    encoder = _load()
    if encoder is not None:
        try:
            return int(encoder.count(data.decode("utf-8", "replace"))), ENCODING  # type: ignore[attr-defined]
        except Exception:
            pass
    return rough(data)
