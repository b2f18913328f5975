"""One module per ``depthpe`` sub-command: ``add_arguments(parser)``, ``run(args)`` and optionally
``DESCRIPTION``; the one-line helps are in ``depthpe.cli.COMMANDS`` (modules load lazily)."""
