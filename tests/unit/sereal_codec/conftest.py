"""Fixtures for the Sereal unit tests: every API-level test runs once per implementation.

``sereal_codec`` is the compiled core when it is built (else the pure reference
again), so these tests hold the compiled core to the same byte-level contract.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

IMPLEMENTATIONS = {"pure": "sereal_codec.pure", "default": "sereal_codec"}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def sereal(request: pytest.FixtureRequest) -> ModuleType:
    """The public API of one implementation (``pure`` or ``default``)."""
    return importlib.import_module(IMPLEMENTATIONS[request.param])
