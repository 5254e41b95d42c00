"""Two ways into the one entry (``cmrunner.entry.main``), the same as the ``cm`` console script.

- ``python -m cmrunner …``: for people and for cm's own spawned processes.
- ``<abs python> -I -S <abs path of this file> …``: the form cm pins into hosts' hook entries
  (``hostconfig.Pins.hook_argv``). It skips the interpreter's ``site`` start (its ``.pth`` files)
  and the ``-m`` machinery (``runpy``, ``importlib.util``, ``contextlib``), which every turn of a
  host would otherwise pay (issue 35, docs/benchmarks.md).

Run as a script under ``-I`` (which implies ``-P`` since Python 3.11) and ``-S``, ``sys.path`` holds
only the standard library: not this file's folder, not the project directory, ``PYTHONPATH`` or
user site-packages. So the script puts the folder that holds this ``cmrunner`` package first itself:
the exact installation whose path the host entry names, be it a venv's site-packages, a
``pip install --user`` folder or a source checkout.

Invariant: a module found neither there nor in the standard library (a third-party package on a
rare hook path, such as pydantic validating a hand-edited ``config.json``, or a subpackage an
editable install maps through its ``.pth`` finder) is not an error: the first such miss runs
``site.main()`` once, exactly what the interpreter would have run at start without ``-S``, and the
import is looked up again. The per-turn path never misses, so it never loads ``site``
(``tests/test_import_boundary.py`` holds that).
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at import; nothing here needs it at run time
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType


class _SiteOnMiss:
    """Last on ``sys.meta_path`` in the script form: on the first import nothing else found, add
    the site directories (``site.main()``) and look the module up again through every finder."""

    done = False

    @classmethod
    def find_spec(cls, name: str, path: "Sequence[str] | None" = None,
                  target: "ModuleType | None" = None) -> "ModuleSpec | None":
        if cls.done:
            return None
        cls.done = True
        import site

        site.main()
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is not cls and find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    return spec
        return None


if __spec__ is None:  # run as a script (the pinned hook form), not through `-m`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if "site" not in sys.modules:
        sys.meta_path.append(_SiteOnMiss)

from cmrunner.entry import main  # noqa: E402  (sys.path is set above)

main()
