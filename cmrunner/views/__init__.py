"""Read-mostly presentations of the state for the front ends.

Holds: ``status`` (``cm status``), ``show`` (exactly what agents receive), ``browse`` (View /
Search), ``confview`` (Current Configuration), ``secretreport`` (withheld sections, the
allow-list, quarantined secrets) and ``demo`` (the whole loop against the synthetic model).

May import: ``cmrunner.core``, ``cmrunner.capture``, the synthetic model (demo) and the Writer
side for job state. Never click or textual; views return data and the front ends print it.
"""
