"""Managing an installation: configuring hosts and models, importing, repairing.

Holds: host configuration generators and bundles (``hostconfig``, ``bundles``, ``mcp_config``,
``winbridge``), the transactional integrations (``integrations/``), ``doctor``, ``uninstall``,
Adjust Memory (``adjust``), model presets and the connection test (``providers``), network
settings (``netsettings``), first-run state (``setupstate``), ``cm import`` (``importer``) and
``cm release`` (``release``).

May import: ``cmrunner.core``, ``cmrunner.capture``, ``cmrunner.mcpserver`` (admission outcomes),
``cmrunner.views`` (reports) and the Writer side for what only it knows (the network client,
job state). Never click or textual: the front ends call in, never the reverse.
"""
