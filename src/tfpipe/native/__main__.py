"""`python -m tfpipe.native build`."""

import sys

from tfpipe.native.build import main

sys.exit(main())
