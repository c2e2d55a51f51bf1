"""Build the compiled Sereal core; all other metadata lives in pyproject.toml.

The extension is optional: where it cannot build, the pure-Python codec is used and
``eventstore.sereal.IMPLEMENTATION`` says ``"pure"``. Set RIAK_EVENTS_NO_EXT=1 to skip it.
"""

from __future__ import annotations

import os
from glob import glob

from setuptools import Extension, setup

sources = sorted(glob("eventstore/sereal/csrc/*.c"))
ext_modules = []
if sources and not os.environ.get("RIAK_EVENTS_NO_EXT"):
    ext_modules.append(
        Extension(
            "eventstore.sereal._sereal",
            sources=sources,
            depends=sorted(glob("eventstore/sereal/csrc/*.h")),
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    )

setup(ext_modules=ext_modules)
