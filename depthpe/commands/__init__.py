"""One module per ``depthpe`` sub-command: ``HELP``, ``add_arguments(parser)``, ``run(args)``."""
