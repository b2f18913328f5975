"""``python -m depthpe COMMAND ...`` = ``depthpe COMMAND ...``."""

import sys

from .cli import main

sys.exit(main())
