"""Agent Integration: installing, removing and checking cm's resources in Pi, Codex and ChatGPT.

``discovery`` finds the hosts, ``codexroot`` and ``pi`` describe the resources each selection
needs, ``tomledit`` edits shared TOML files entry by entry, ``txn`` applies a whole change all or
nothing, ``manifest`` records what cm owns, ``manager`` plans and applies a selection and
``checks`` reports what an installation check proved and what it cannot. Never imported on a
hook path.
"""
