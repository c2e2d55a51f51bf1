"""Marks of the Spark test modules."""

from __future__ import annotations

import pytest

#: Spark's py4j gateway leaves sockets for the garbage collector to close, at any later
#: moment of the module; those ResourceWarnings (and the unraisable-exception warnings
#: they become) come from Spark, not from the code under test. Each module that starts
#: Spark sets ``pytestmark = SPARK_WARNINGS``.
SPARK_WARNINGS = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
