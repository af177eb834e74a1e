"""``python -m pilot`` is the ``pilot`` command."""

import sys

from pilot.cli.main import main

sys.exit(main())
