"""The click commands of `cm`, one module per area; `cmrunner.cli` loads them all."""
