"""``python -m gpusm ARGS``: the ``gpusm`` command."""

import sys

from .cli import main

sys.exit(main())
