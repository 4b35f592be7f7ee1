"""TensorFlow's start-up logs, kept off the CLI's stderr unless asked for.

The filter itself (why it is needed, what it drops) lives in `tfpipe._tf`, which
`import tfpipe` uses too; the CLI asks for less: C++ errors only (level 2) and
the Python-side "tensorflow" / "absl" loggers at ERROR, unless `-v`.
"""

from __future__ import annotations

import logging
import os

from tfpipe._tf import (  # noqa: F401 - the filter's names, for the CLI and its tests
    ABSL_BANNER,
    TF_LOG_LINE,
    LineFilter,
    filtered_stderr,
    keep_lines,
    level,
    level_is_default,
    quiet_tensorflow_start,
)

# The CLI's default: INFO and WARNING from TF's C++ side are start-up notices
# and per-iterator chatter ("Local rendezvous is aborting ... End of sequence").
DEFAULT_LEVEL = "2"


def configure(verbose: bool = False) -> int:
    """Set the log defaults before TensorFlow is imported; returns the C++ level in force.

    A `TF_CPP_MIN_LOG_LEVEL` the user set wins; otherwise 2 (errors only), or 0
    with ``verbose``. Python-side TF logging (the "tensorflow" logger) follows:
    errors only unless ``verbose``.
    """
    if "TF_CPP_MIN_LOG_LEVEL" not in os.environ or level_is_default():
        # (`import tfpipe` may have set the library's default already: not the user's)
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0" if verbose else DEFAULT_LEVEL
    quiet_tensorflow_start()  # the start-up filter, when TensorFlow is not imported yet
    for name in ("tensorflow", "absl"):  # absl: Keras' and TF's Python-side notices
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    quiet_tensorflow_start()
    return level()
