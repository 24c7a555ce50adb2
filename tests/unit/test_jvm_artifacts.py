"""The jar cache of notify_transport.jvm, with a stand-in ``mvn`` script (no network, no Maven)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from notify_transport.jvm import ArtifactSet, JvmArtifactsError, classpath, fetch
from notify_transport.jvm.__main__ import main as jvm_main
from notify_transport.testing.apache_kafka import ApacheKafka, SecureListener

FAKE_MVN = """#!/bin/sh
# records its arguments, then writes two jars where -DoutputDirectory= says
echo "$@" >> "{calls}"
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
[ -n "{fail}" ] && {{ echo "[ERROR] Could not resolve dependencies"; exit 1; }}
mkdir -p "$out" && echo a > "$out/a-1.jar" && echo b > "$out/b-2.jar"
"""


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NOTIFY_TRANSPORT_JVM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_mvn(tmp_path: Path, fail: bool = False) -> tuple[str, Path]:
    calls = tmp_path / "calls.txt"
    script = tmp_path / ("mvn-fail" if fail else "mvn")
    script.write_text(FAKE_MVN.format(calls=calls, fail="yes" if fail else ""))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), calls


def test_fetch_once_then_from_the_cache(cache, tmp_path):
    mvn, calls = fake_mvn(tmp_path)
    artifacts = ArtifactSet("apache-kafka", {"kafka.version": "4.1.1"})
    jars = fetch(artifacts, maven=mvn)
    assert [jar.name for jar in jars] == ["a-1.jar", "b-2.jar"]
    assert all(jar.is_file() and cache in jar.parents for jar in jars)
    assert "-Dkafka.version=4.1.1" in calls.read_text()
    assert fetch(artifacts, maven=mvn) == jars and classpath(artifacts) == jars
    assert len(calls.read_text().splitlines()) == 1  # the second fetch ran no Maven


def test_classpath_never_downloads_and_names_the_set_up_step(cache):
    with pytest.raises(JvmArtifactsError, match="python -m notify_transport.jvm fetch apache-kafka"):
        classpath(ArtifactSet("apache-kafka"))


def test_each_version_has_its_own_entry(cache, tmp_path):
    mvn, calls = fake_mvn(tmp_path)
    one = fetch(ArtifactSet("apache-kafka", {"kafka.version": "4.0.0"}), maven=mvn)
    two = fetch(ArtifactSet("apache-kafka", {"kafka.version": "4.1.1"}), maven=mvn)
    assert one[0].parent != two[0].parent and len(calls.read_text().splitlines()) == 2


def test_a_half_written_entry_is_fetched_again(cache, tmp_path):
    mvn, calls = fake_mvn(tmp_path)
    artifacts = ArtifactSet("apache-kafka")
    jars = fetch(artifacts, maven=mvn)
    jars[1].unlink()  # a run killed while copying, or a cleaned cache
    assert fetch(artifacts, maven=mvn)[1].is_file()
    assert len(calls.read_text().splitlines()) == 2


def test_a_failed_fetch_says_so_and_leaves_no_entry(cache, tmp_path):
    mvn, _ = fake_mvn(tmp_path, fail=True)
    artifacts = ArtifactSet("apache-kafka")
    with pytest.raises(JvmArtifactsError, match="Could not resolve dependencies"):
        fetch(artifacts, maven=mvn)
    with pytest.raises(JvmArtifactsError):
        classpath(artifacts)
    assert not any(p for p in cache.iterdir() if not p.name.startswith("."))


def test_unknown_pom_and_missing_maven(cache, monkeypatch):
    with pytest.raises(JvmArtifactsError, match="no pom named 'nope'.*apache-kafka"):
        fetch(ArtifactSet("nope"))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(JvmArtifactsError, match="apt-get install maven"):
        fetch(ArtifactSet("apache-kafka"))


def test_command_line_reports_errors_in_one_line(cache, capsys):
    assert jvm_main(["classpath", "apache-kafka"]) == 1
    assert capsys.readouterr().err.startswith("error: the jars of apache-kafka")
    with pytest.raises(SystemExit):
        jvm_main(["fetch", "apache-kafka", "-D", "no-equals-sign"])


def test_cluster_configuration_follows_its_size(tmp_path):
    single = ApacheKafka(base_dir=tmp_path / "one")
    props = single.node(1).properties()
    assert props["default.replication.factor"] == 1 and props["min.insync.replicas"] == 1
    assert props["offsets.topic.replication.factor"] == 1
    cluster = ApacheKafka(nodes=3, base_dir=tmp_path / "three", broker_config={"num.partitions": 4})
    voters = cluster.voters().split(",")
    assert [v.split("@")[0] for v in voters] == ["1", "2", "3"]
    for node in cluster.nodes:
        props = node.properties()
        assert props["node.id"] == node.node_id and props["controller.quorum.voters"] == cluster.voters()
        assert props["default.replication.factor"] == 3 and props["min.insync.replicas"] == 2
        assert props["transaction.state.log.min.isr"] == 2 and props["num.partitions"] == 4
        assert props["log.dirs"].startswith(str(tmp_path / "three"))
    ports = [n.port for n in cluster.nodes] + [n.controller_port for n in cluster.nodes]
    assert len(set(ports)) == 6 and cluster.bootstrap.count(",") == 2
    assert os.path.basename(cluster.node(2).data_dir.parent) == "node-2"


def test_a_secure_listener_is_configured_beside_the_plain_one(tmp_path):
    key, certificate = tmp_path / "key.pem", tmp_path / "cert.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n")
    certificate.write_text("-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n")
    password = 'pa"ss\\word'
    cluster = ApacheKafka(nodes=3, base_dir=tmp_path / "three", secure=SecureListener(
        users={"alice": password, "bob": "b"}, key=key, certificate=certificate))
    assert password not in repr(cluster.secure)
    node = cluster.node(2)
    props = node.properties()
    assert props["listeners"].split(",") == [f"PLAINTEXT://127.0.0.1:{node.port}",
                                             f"CONTROLLER://127.0.0.1:{node.controller_port}",
                                             f"SECURE://127.0.0.1:{node.secure_port}"]
    assert "CONTROLLER" not in props["advertised.listeners"] and "SECURE://" in props["advertised.listeners"]
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.name.secure.plain.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="pa\\"ss\\\\word" user_bob="b";')
    keystore = Path(props["listener.name.secure.ssl.keystore.location"])
    assert not keystore.exists(), "building the settings writes no file"
    # a Java properties file reads a backslash as an escape: the JAAS line's own are doubled
    node.write_config()
    assert keystore.read_text() == key.read_text() + certificate.read_text()
    assert keystore.stat().st_mode & 0o077 == 0
    line = next(x for x in node.config_path.read_text().splitlines() if x.startswith("listener.name.secure.plain"))
    assert line.endswith('user_alice="pa\\\\"ss\\\\\\\\word" user_bob="b";')
    ports = [p for n in cluster.nodes for p in (n.port, n.controller_port, n.secure_port)]
    assert len(set(ports)) == 9
    assert cluster.secure_bootstrap == ",".join(f"127.0.0.1:{n.secure_port}" for n in cluster.nodes)
    url = cluster.secure_url("alice", "vh")
    assert url.startswith("kafka://alice:pa%22ss%5Cword@127.0.0.1:") and "/vh?" in url
    assert "security_protocol=SASL_SSL" in url and "ssl_cafile=" in url


def test_without_a_certificate_the_secure_listener_is_sasl_over_plain_text(tmp_path):
    cluster = ApacheKafka(base_dir=tmp_path / "one", secure=SecureListener(users={"alice": "a"}))
    props = cluster.node(1).properties()
    assert props["listener.security.protocol.map"].endswith("SECURE:SASL_PLAINTEXT")
    assert not [k for k in props if "ssl" in k]
    assert "ssl_cafile" not in cluster.secure_url("alice")
    with pytest.raises(ValueError, match="no secure listener"):
        _ = ApacheKafka(base_dir=tmp_path / "plain").secure_bootstrap
    cluster.node(1).write_config()
    assert not cluster.node(1).keystore_path.exists()


def test_a_tls_listener_without_its_key_is_refused(tmp_path):
    certificate = tmp_path / "cert.pem"
    certificate.write_text("c")
    cluster = ApacheKafka(base_dir=tmp_path / "one", secure=SecureListener(users={"a": "b"}, certificate=certificate))
    with pytest.raises(ValueError, match="needs the certificate's key"):
        cluster.node(1).write_config()
