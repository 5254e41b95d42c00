"""The interactive management UI (textual): first-run setup and the three-column home.

Imported only by ``cm`` with no arguments and the ``config`` / ``config --network`` /
``uninstall`` shortcuts, never on a hook, capture or read path.
"""
