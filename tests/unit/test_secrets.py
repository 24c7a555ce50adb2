"""One rule says what is a secret, for URLs, client properties, contexts and payloads."""
from __future__ import annotations

import json
import re

import pytest

from hypothesis import given, strategies as st
from oslo_utils import strutils

from notify_transport.notify.notifier import sanitize_context
from notify_transport import secrets
from notify_transport.secrets import MASK, is_secret, mask, mask_properties, without_secrets

# names mask_password's documentation lists as masked
OSLO_DOCUMENTED = ["adminPass", "admin_pass", "password", "original_password", "auth_token",
                   "new_pass", "auth_password", "secret_uuid", "sys_pswd", "token", "secret",
                   "configdrive", "CHAPPASSWORD"]
affix = st.text(alphabet="abcdefxyz_.-", max_size=6)
oslo_names = st.builds(lambda a, k, b: a + k + b, affix, st.sampled_from(OSLO_DOCUMENTED), affix)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.-", min_size=1, max_size=20)
secret_values = st.text(alphabet="0123456789ABCDEF", min_size=6, max_size=12).map(lambda s: "Zq" + s)


@given(oslo_names)
def test_every_name_oslo_masks_is_a_secret(name: str) -> None:
    assert strutils.mask_dict_password({name: None})[name] is not None
    assert is_secret(name)


@given(names)
def test_what_oslo_masks_is_always_a_secret_here_too(name: str) -> None:
    if strutils.mask_dict_password({name: None})[name] is not None:
        assert is_secret(name)


def test_the_same_rule_for_urls_properties_and_contexts() -> None:
    for name in ("sasl.password", "sasl_password", "ssl.key.pem", "sasl.oauthbearer.config",
                 "service_token", "auth_token_info", "api_key", "db_passwd"):
        assert is_secret(name), name
    for name in ("ssl.key.location", "ssl_keyfile", "acks", "client.id", "user_id", "request_id",
                 "project_domain_id", "roles", 3):
        assert not is_secret(name), name  # type: ignore[arg-type]


@given(secret_values, secret_values, st.sampled_from(["api_key", "db_password", "service_token",
                                                      "x_secret"]))
def test_mask_hides_secrets_at_any_depth(value: str, in_text: str, key: str) -> None:
    payload = {"outer": [{key: value, "keep": 1}], "note": f"password={in_text}", "n": (1, 2)}
    shown = json.dumps(mask(payload))
    assert value not in shown and in_text not in shown
    assert mask(payload)["outer"][0] == {key: MASK, "keep": 1}


def test_a_dict_context_loses_every_secret_key_and_is_not_copied_without_one() -> None:
    ctxt = {"user": "u", "api_key": "k", "db_password": "p", "auth_token": "t"}
    assert sanitize_context(ctxt) == {"user": "u"}
    clean = {"user": "u", "request_id": "req-1"}
    assert without_secrets(clean) is clean


def test_properties_mask_values_and_drop_callbacks() -> None:
    assert mask_properties({"sasl.password": "x", "ssl.key.password": "", "acks": "all",
                            "error_cb": print}) == {"sasl.password": MASK, "ssl.key.password": "",
                                                    "acks": "all"}


@pytest.mark.parametrize("name", [
    "sasl.password", "sasl.oauthbearer.client.secret", "ssl.key.password", "ssl.keystore.key",
    "ssl.key.pem", "kafka.sasl.jaas.config", "transport_url", "auth_token", "service_password",
    "db_passwd", "aws_access_key", "api_key", "credentials", "private_key", "sasl.oauthbearer.config"])
def test_the_name_pattern_hides_what_is_secret(name):
    """Spark redacts with the pattern, everything else asks is_secret: both hide these names
    (a URL and a JAAS config carry credentials inside them)."""
    assert re.search(secrets.name_pattern(), name)
    assert re.search(secrets.name_pattern(), name.upper())


@pytest.mark.parametrize("name", ["bootstrap.servers", "ssl.key.location", "group.id", "topic",
                                  "sasl.mechanism", "security.protocol", "client.id"])
def test_the_name_pattern_leaves_what_is_not_secret(name):
    assert not re.search(secrets.name_pattern(), name)
