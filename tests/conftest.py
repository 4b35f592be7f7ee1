"""Suite-wide settings. Each area keeps its fixtures in its own tests/<area>/conftest.py."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
