"""`python -m deepresearch.cli`: the `deepresearch` command."""

import sys

from deepresearch.cli import main

sys.exit(main())
