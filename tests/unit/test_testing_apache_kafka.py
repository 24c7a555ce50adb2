"""The Apache Kafka launcher's cluster ids, without starting a node."""
from __future__ import annotations

import base64

from hypothesis import given, strategies as st

from notify_transport.testing.apache_kafka import cluster_id


def test_an_id_starting_with_a_dash_is_drawn_again():
    # 0xf8 encodes to "-" first: the storage tool would read "-t -..." as a missing argument.
    draws = iter([b"\xf8" + bytes(15), bytes(16)])
    assert cluster_id(lambda: next(draws)) == base64.urlsafe_b64encode(bytes(16)).decode().rstrip("=")


@given(st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=5).filter(
    lambda draws: not base64.urlsafe_b64encode(draws[-1]).startswith(b"-")))
def test_every_id_is_22_url_safe_characters_not_starting_with_a_dash(draws):
    source = iter(draws)
    made = cluster_id(lambda: next(source))
    assert len(made) == 22 and not made.startswith("-")
    assert base64.urlsafe_b64decode(made + "==") in draws


def test_fresh_ids_differ():
    assert len({cluster_id() for _ in range(200)}) == 200
