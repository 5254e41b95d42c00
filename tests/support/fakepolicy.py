"""Moved to ``cmrunner.synthetic.fakepolicy`` (the demo ships it); kept so older imports work."""

from cmrunner.synthetic.fakepolicy import *  # noqa: F401,F403
