"""`python -m tfpipe.records build`: compile the columnar table encoder ahead of time."""

import sys

from tfpipe.records.columnar import main

sys.exit(main())
