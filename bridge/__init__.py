"""What runs inside or next to a host (installed as ``cmrunner.bridge``).

The Pi extension (TypeScript, shelling out to ``cm capture``) and the WSL/PowerShell bridge live
here as package data; no Python module of this package is imported on a hook path.
"""
