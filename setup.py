"""Build the compiled modules; all other metadata lives in pyproject.toml.

Every extension is optional: where one cannot build, its pure-Python reference is used
(the codec's ``sereal_codec.IMPLEMENTATION`` then says ``"pure"``). Set
RIAK_EVENTS_NO_EXT=1 to skip them all.
"""

from __future__ import annotations

import os
from glob import glob

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]

#: Each compiled module, in the package that uses it: the codec's own, the relocator's
#: frame scanner (with the codec's header-only readers) and the consumer's tagger (the
#: codec's header-only binding macros, pymodule.h).
MODULES = [
    ("sereal_codec._sereal", "sereal_codec/csrc", []),
    ("relocator._frames", "relocator/csrc", ["sereal_codec/csrc"]),
    ("consumer_lib._tagger", "consumer_lib/csrc", ["sereal_codec/csrc"]),
]

ext_modules = []
if not os.environ.get("RIAK_EVENTS_NO_EXT"):
    for name, folder, include in MODULES:
        sources = sorted(glob(f"{folder}/*.c"))
        if not sources:
            continue
        ext_modules.append(
            Extension(
                name,
                sources=sources,
                include_dirs=include,
                depends=sorted(
                    glob(f"{folder}/*.h") + [h for i in include for h in glob(f"{i}/*.h")]
                ),
                extra_compile_args=FLAGS,
                optional=True,
            )
        )

setup(ext_modules=ext_modules)
