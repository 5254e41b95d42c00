"""A throwaway "overlay" venv whose interpreter runs cm with the test seams (``seams.py``).

``build(root)`` creates, inside ``root`` (a temporary directory the caller removes):
- ``pyvenv.cfg`` naming the base interpreter's home, and ``bin/python3`` linking to that
  interpreter, so Python treats ``root`` as a venv of its own;
- ``lib/pythonX.Y/site-packages/cm_test_seams.py`` (a copy of ``seams.py``) and
  ``cm-test-seams.pth``, which imports it and calls ``install`` with the real venv's site-packages
  (where cm is installed), so cm and its dependencies import exactly as from the real venv;
- ``bin/cm``: the installed console script with its interpreter line pointing at ``bin/python3``.

A process started as ``<root>/bin/cm …`` has ``sys.executable == <root>/bin/python3``, so the drains
it spawns (``sys.executable -I -m cmrunner session-drain``) run seamed too. Nothing is written to
the real venv: a user's installation never holds a seam.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

SEAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seams.py")


class Overlay:
    __slots__ = ("root", "python", "cm")

    def __init__(self, root: str) -> None:
        self.root = root
        self.python = os.path.join(root, "bin", "python3")
        self.cm = os.path.join(root, "bin", "cm")


def _base_home() -> str:
    with open(os.path.join(sys.prefix, "pyvenv.cfg"), encoding="utf-8") as handle:
        for line in handle:
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return value.strip()
    return os.path.dirname(os.path.realpath(sys.executable))


def build(root: str) -> Overlay:
    """Create the overlay in ``root`` (see module docstring) from the running (real) venv."""
    if sys.prefix == sys.base_prefix:
        raise RuntimeError("run the tests from cm's venv (.venv/bin/pytest): the overlay extends it")
    overlay = Overlay(root)
    real_site = sysconfig.get_path("purelib")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site_dir = os.path.join(root, "lib", f"python{version}", "site-packages")
    os.makedirs(site_dir)
    os.makedirs(os.path.join(root, "bin"))
    with open(os.path.join(root, "pyvenv.cfg"), "w", encoding="utf-8") as handle:
        handle.write(f"home = {_base_home()}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n")
    os.symlink(os.path.realpath(sys.executable), overlay.python)
    shutil.copyfile(SEAMS, os.path.join(site_dir, "cm_test_seams.py"))
    with open(os.path.join(site_dir, "cm-test-seams.pth"), "w", encoding="utf-8") as handle:
        handle.write(f"import cm_test_seams; cm_test_seams.install({real_site!r})\n")
    real_cm = os.path.join(os.path.dirname(sys.executable), "cm")
    with open(real_cm, encoding="utf-8") as handle:
        script = handle.read().split("\n", 1)[1]
    with open(overlay.cm, "w", encoding="utf-8") as handle:
        handle.write(f"#!{overlay.python}\n{script}")
    os.chmod(overlay.cm, 0o755)
    return overlay
