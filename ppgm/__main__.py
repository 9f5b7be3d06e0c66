"""``python -m ppgm``: the command line lives in ppgm.adapters (it drives pgmpy models)."""

import sys

from ppgm.adapters.cli import main

sys.exit(main())
