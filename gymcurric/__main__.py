"""``python -m gymcurric`` is the ``gymcurric`` command."""

import sys

from gymcurric.cli import main

sys.exit(main())
