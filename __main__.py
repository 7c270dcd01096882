"""`python -m faultline`: the same command line as the `faultline` console script."""

import sys

from faultline.controller.cli import main

sys.exit(main())
