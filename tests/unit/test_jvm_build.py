"""Jars built from this project's Java sources with javac, cached like the fetched ones."""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from notify_transport.jvm import JvmArtifactsError
from notify_transport.jvm.build import JavaSources, build, cached_jar, jars_named
from notify_transport.pipeline import jvm_decoder

needs_javac = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK here")

GREETER = "package demo;\npublic final class Greeter {\n    public static String hello() { return \"%s\"; }\n}\n"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NOTIFY_TRANSPORT_JVM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sources(tmp_path: Path, text: str = GREETER % "hello", classpath: tuple[Path, ...] = ()) -> JavaSources:
    folder = tmp_path / "src"
    (folder / "demo").mkdir(parents=True, exist_ok=True)
    (folder / "demo" / "Greeter.java").write_text(text)
    return JavaSources("demo", classpath, folder)


@needs_javac
def test_built_once_then_found_in_the_cache(cache, tmp_path):
    demo = sources(tmp_path)
    assert cached_jar(demo) is None
    jar = build(demo)
    assert jar.parent.parent == cache and cached_jar(demo) == jar
    with zipfile.ZipFile(jar) as archive:
        names = archive.namelist()
    assert names[0] == "META-INF/MANIFEST.MF" and "demo/Greeter.class" in names
    assert build(demo, javac=str(tmp_path / "no-such-javac")) == jar  # no compiler needed the second time
    assert [p.name for p in cache.iterdir()] == [jar.parent.name]  # no work folder left behind


def test_the_key_follows_the_sources_and_the_jars_compiled_against(tmp_path):
    first = sources(tmp_path).key
    assert sources(tmp_path).key == first
    assert sources(tmp_path, GREETER % "hi").key != first
    assert sources(tmp_path, classpath=(Path("/x/spark-sql-api_2.13-4.2.0.jar"),)).key != first
    assert sources(tmp_path, classpath=(Path("/x/spark-sql-api_2.13-4.1.0.jar"),)).key != (
        sources(tmp_path, classpath=(Path("/x/spark-sql-api_2.13-4.2.0.jar"),)).key)


@needs_javac
def test_a_compile_error_is_reported_with_javacs_words_and_nothing_is_cached(cache, tmp_path):
    broken = sources(tmp_path, "package demo;\npublic final class Greeter { int x = ; }\n")
    said = r"(?s)javac could not build the demo jar \(exit 1\):.*Greeter.java:2: error"
    with pytest.raises(JvmArtifactsError, match=said):
        build(broken)
    assert cached_jar(broken) is None and not any(cache.iterdir())


def test_without_javac_the_error_names_a_jdk(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(JvmArtifactsError, match="javac is needed.*JDK"):
        build(sources(tmp_path))


def test_missing_sources_and_missing_jars_are_named(tmp_path):
    with pytest.raises(JvmArtifactsError, match="no Java sources named 'nothing'"):
        JavaSources("nothing", ()).files()
    (tmp_path / "spark-sql-api_2.13-4.2.0.jar").write_text("")
    assert jars_named(tmp_path, ("spark-sql-api_",)) == (tmp_path / "spark-sql-api_2.13-4.2.0.jar",)
    with pytest.raises(JvmArtifactsError, match="no jar named jackson-core-"):
        jars_named(tmp_path, ("spark-sql-api_", "jackson-core-"))


def test_the_decoder_compiles_against_pysparks_own_jars():
    decoder = jvm_decoder.sources()
    assert [path for path, _ in decoder.files()] == ["notifytransport/spark/DecodeNotification.java"]
    names = sorted(jar.name for jar in decoder.classpath)
    assert len(names) == 2 and names[0].startswith("jackson-core-") and names[1].startswith("spark-sql-api_")


@needs_javac
def test_the_decoder_jar_is_built_and_joins_spark_jars(cache):
    conf = jvm_decoder.session_conf("/opt/mine.jar")
    jars = conf["spark.jars"].split(",")
    assert jars[0] == "/opt/mine.jar" and jars[1].endswith("decoder.jar") and len(jars) == 2
    assert jvm_decoder.session_conf(conf["spark.jars"]) == conf
    with zipfile.ZipFile(jars[1]) as archive:
        assert "notifytransport/spark/DecodeNotification.class" in archive.namelist()


def test_without_a_jdk_the_session_decodes_in_python(cache, monkeypatch, caplog):
    monkeypatch.setenv("PATH", "")
    assert jvm_decoder.session_conf("/opt/mine.jar") == {}
    assert "decoded in Python" in caplog.text
