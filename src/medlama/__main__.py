"""``python -m medlama``: the same as the ``medlama`` command."""

import sys

from medlama.cli import main

sys.exit(main())
