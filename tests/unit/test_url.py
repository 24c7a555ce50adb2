"""Transport URL parsing edge cases."""
import pytest

from notify_transport import InvalidTransportURL, TransportHost, TransportURL


def test_several_hosts_vhost_and_query():
    url = TransportURL.parse(None, "kafka://user:pass@host1:9092,host2:9093/vh?compression_codec=gzip")
    assert url.transport == "kafka"
    assert url.virtual_host == "vh"
    assert url.hosts == [TransportHost("host1", 9092, "user", "pass"), TransportHost("host2", 9093)]
    assert url.query == {"compression_codec": "gzip"}
    assert url.bootstrap_servers() == ["host1:9092", "host2:9093"]


def test_default_port_filled_in():
    assert TransportURL.parse(None, "kafka://h1,h2:1").bootstrap_servers() == ["h1:9092", "h2:1"]
    assert TransportURL.parse(None, "rabbit://h").bootstrap_servers() == ["h:5672"]


def test_ipv6_hosts():
    url = TransportURL.parse(None, "kafka://[::1]:9092,[fe80::1]/")
    assert [h.hostname for h in url.hosts] == ["::1", "fe80::1"]
    assert url.hosts[0].port == 9092 and url.hosts[1].port is None
    assert url.bootstrap_servers() == ["[::1]:9092", "[fe80::1]:9092"]


def test_percent_encoded_credentials():
    url = TransportURL.parse(None, "kafka://us%40er:p%3Aa%2Fss%40@h:1")
    assert url.hosts[0].username == "us@er"
    assert url.hosts[0].password == "p:a/ss@"
    # printing quotes them back, so a round trip is lossless
    assert TransportURL.parse(None, url.format(reveal_secrets=True)).hosts == url.hosts


def test_empty_vs_missing_vhost():
    assert TransportURL.parse(None, "kafka://h:1").virtual_host is None
    assert TransportURL.parse(None, "kafka://h:1/").virtual_host == ""
    assert TransportURL.parse(None, "rabbit://h:1//").virtual_host == "/"
    assert TransportURL.parse(None, "kafka://h:1/a%2Fb").virtual_host == "a/b"


def test_no_hosts():
    url = TransportURL.parse(None, "kafka://")
    assert url.hosts == [] and url.virtual_host is None


def test_repeated_query_keys_joined():
    assert TransportURL.parse(None, "kafka://h?a=1&a=2").query == {"a": "1,2"}


@pytest.mark.parametrize("bad", [
    "h:9092", "://h", "kafka://h:port", "kafka://h:99999", "kafka://[::1",
    "kafka://[::1]x", "kafka://h:-1", "ka fka://h",
])
def test_malformed_urls_raise_clear_errors(bad):
    with pytest.raises(InvalidTransportURL):
        TransportURL.parse(None, bad)


def test_empty_url_raises():
    with pytest.raises(InvalidTransportURL, match="No transport URL"):
        TransportURL.parse(None, "")


def test_password_never_in_repr_or_error():
    url = TransportURL.parse(None, "kafka://u:s3cret@h:1/v")
    assert "s3cret" not in repr(url)
    assert "s3cret" not in repr(url.hosts[0])
    assert "s3cret" not in url.redacted()
    assert "s3cret" not in str(url)  # str() is for printing; format(reveal_secrets=True) is the usable URL
    assert "s3cret" in url.format(reveal_secrets=True)
    with pytest.raises(InvalidTransportURL) as err:
        TransportURL.parse(None, "kafka://u:s3cret@h:notaport")
    assert "s3cret" not in str(err.value) and "s3cret" not in err.value.url


def test_parse_reads_conf_transport_url():
    class Conf:
        transport_url = "fake://h/v"
    assert TransportURL.parse(Conf()).virtual_host == "v"
