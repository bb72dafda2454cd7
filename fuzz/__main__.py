"""``python -m fuzz --minutes N``: the harness's command line (``fuzz/run.py``)."""

import sys

from fuzz.run import main

sys.exit(main())
