"""No secret of a transport URL reaches a repr, a str() or a log line."""
import logging
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notify_transport import InvalidTransportURL, TransportURL
from notify_transport.secrets import is_secret as is_secret_key
from notify_transport.url import redact_raw


@pytest.mark.parametrize("key", [
    "sasl_password", "ssl_client_key_password", "ssl.key.password", "sasl.oauthbearer.client.secret",
    "client_secret", "auth_token", "api_key", "access_key", "ssl_key", "ssl.key.pem", "PASSWORD",
    "db_passwd", "credentials",
])
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["ssl_keyfile", "ssl.key.location", "sasl_username", "compression_codec",
                                 "group_id", "ssl_cafile", "key_serializer_name"])
def test_non_secret_keys(key):
    assert not is_secret_key(key)


def test_query_password_not_in_repr_or_str():
    url = TransportURL.parse(None, "kafka://k1:9093/?sasl_password=SECRET&acks=all")
    for shown in (repr(url), str(url), url.redacted()):
        assert "SECRET" not in shown and "acks=all" in shown
    assert "sasl_password=SECRET" in url.format(reveal_secrets=True)
    assert url.query["sasl_password"] == "SECRET"


def test_embedded_client_property_secret_redacted():
    url = TransportURL.parse(None, "kafka://k1/?librdkafka_config=sasl.password:HUSH,acks:all")
    assert "HUSH" not in str(url) and "acks" in str(url)


def test_raw_redaction_of_unparseable_urls():
    with pytest.raises(InvalidTransportURL) as err:
        TransportURL.parse(None, "kafka://u:HUSH@h:bad/?token=ALSO")
    for text in (str(err.value), err.value.url):
        assert "HUSH" not in text and "ALSO" not in text
    assert "HUSH" not in redact_raw("kafka://u:HUSH@h?sasl_password=x")


SECRET = st.text(alphabet=string.ascii_letters + string.digits + "!$&'()*+,;=:@/?#%~ é", min_size=1,
                 max_size=16).map(lambda s: "Zq" + s + "Zq")  # a marker no URL part contains by chance
SECRET_KEYS = st.sampled_from(["sasl_password", "ssl_key_password", "client_secret", "auth_token",
                               "x_api_key", "my.password.file.contents"])


@settings(max_examples=150, deadline=None)
@given(SECRET, SECRET, SECRET_KEYS, st.sampled_from(["kafka", "rabbit", "ntkafka"]),
       st.sampled_from(["", "vh", "/v"]), st.booleans())
def test_no_generated_secret_in_repr_str_or_logs(password, query_secret, key, scheme, vhost, bad_port):
    from urllib.parse import quote, quote_plus
    port = "notaport" if bad_port else "9092"
    text = (f"{scheme}://user:{quote(password, safe='')}@host:{port},user:{quote(password, safe='')}@h2/"
            f"{vhost}?{key}={quote_plus(query_secret)}&acks=all")
    logger = logging.getLogger("test.url.redaction")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))
    handler = Keep()
    logger.addHandler(handler)
    url_logger = logging.getLogger("notify_transport.url")
    url_logger.addHandler(handler)
    try:
        try:
            url = TransportURL.parse(None, text)
        except InvalidTransportURL as exc:
            shown = [str(exc), exc.url, repr(exc)]
            logger.error("bad url: %s", exc)
        else:
            assert url.hosts[0].password == password and url.query[key] == query_secret
            shown = [repr(url), str(url), url.redacted(), repr(url.hosts), "%s" % url, f"{url!r}"]
            logger.warning("url %s %r", url, url)
    finally:
        logger.removeHandler(handler)
        url_logger.removeHandler(handler)
    for secret in (password, query_secret, quote(password, safe=""), quote_plus(query_secret)):
        for item in shown + records:
            assert secret not in item
