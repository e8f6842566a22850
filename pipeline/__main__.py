"""`python -m pipeline`: Python runs this file of the package's root; the verbs are ``pipeline.cli``."""

import sys

from pipeline.cli import main

sys.exit(main())
