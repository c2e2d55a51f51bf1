"""The Riak client's settings, from a mapping."""

from __future__ import annotations

import pytest

from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError


def test_riak_settings_from_mapping() -> None:
    s = RiakSettings.from_mapping({"nodes": ["http://a:8098", "http://b:8098"], "timeout_s": 3})
    assert s.nodes == ("http://a:8098", "http://b:8098")
    assert s.timeout_s == 3.0
    with pytest.raises(SettingsError, match="nodes"):
        RiakSettings.from_mapping({"nodes": []})
    with pytest.raises(SettingsError, match="unknown"):
        RiakSettings.from_mapping({"node": ["x"]})
