"""``python -m sheets_emulator``: the same as the ``sheets-emulator`` command."""

import sys

from sheets_emulator.cli import main

sys.exit(main())
