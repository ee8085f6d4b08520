"""``python -m sheetsync``: the ``sheetsync`` command, for a venv whose scripts are not on
PATH."""

import sys

from sheetsync.cli import main

sys.exit(main())
