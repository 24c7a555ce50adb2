"""The rabbit driver's cache of recently seen message ids (drivers/rabbit/dedup.py)."""
from __future__ import annotations

from hypothesis import given, strategies as st

from notify_transport.drivers.rabbit.dedup import DedupCache


@given(st.lists(st.text(alphabet="abcdef", min_size=1, max_size=3), max_size=60), st.integers(1, 8))
def test_an_id_is_reported_seen_while_it_is_among_the_last_remembered(ids: list[str], size: int) -> None:
    cache = DedupCache(size)
    remembered: list[str] = []  # the model: first in, first out
    for unique_id in ids:
        expected = unique_id in remembered
        assert cache.seen(unique_id) is expected
        if not expected:
            remembered.append(unique_id)
            del remembered[:-size]
        assert all(cache.contains(i) for i in remembered)
