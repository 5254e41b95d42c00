"""Moved to ``cmrunner.synthetic.fakemodel`` (the demo ships it); kept so older imports work."""

from cmrunner.synthetic.fakemodel import *  # noqa: F401,F403
