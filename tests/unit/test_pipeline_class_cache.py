"""The JVM class-data-sharing archive: adopted once its writer exited, one dump at a time."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

from notify_transport.pipeline.class_cache import ClassCache  # noqa: E402


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_first_run_writes_a_dump_and_the_next_adopts_it_once_its_jvm_exited(tmp_path):
    first = ClassCache(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in first.java_options()
    assert first.dump is not None
    first.dump.write_bytes(b"archive")  # what the JVM writes at exit
    first.started(os.getpid())  # a JVM that still runs

    writing = ClassCache(tmp_path)
    assert "SharedArchiveFile" not in writing.java_options() and writing.dump is None  # no second dump

    first.started(_dead_pid())
    done = ClassCache(tmp_path)
    assert done.java_options().startswith(f"-XX:SharedArchiveFile={done.archive} ")
    assert done.archive.read_bytes() == b"archive" and not list(tmp_path.glob("*.dump"))


def test_an_empty_dump_of_an_exited_jvm_is_dropped(tmp_path):
    first = ClassCache(tmp_path)
    first.java_options()
    assert first.dump is not None
    first.dump.write_bytes(b"")
    first.started(_dead_pid())
    again = ClassCache(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in again.java_options()
    assert not again.archive.exists() and list(tmp_path.glob("*.dump")) == []


def test_the_archive_is_named_after_the_spark_home_whose_class_path_it_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/cache/spark-home-a")
    first = ClassCache(tmp_path).key
    monkeypatch.setenv("SPARK_HOME", "/cache/spark-home-b")
    assert ClassCache(tmp_path).key != first


def test_writing_the_archive_prints_no_class_sharing_warnings(tmp_path):
    """A user's first run wrote some 1,400 lines of "[warning][cds] Skipping ...: Signed JAR" and
    the like to stderr as the JVM dumped Spark's classes; only the dump's errors may show."""
    import shlex
    import shutil
    from pathlib import Path

    import pyspark

    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    cache = ClassCache(tmp_path)
    options = cache.java_options()
    assert cache.dump is not None
    jars = Path(pyspark.__file__).parent / "jars"
    # janino's compiler, from a signed jar of Spark's: its classes are among those a dump leaves out
    done = subprocess.run([java, *shlex.split(options), "-cp", f"{jars}/*", "org.codehaus.janino.Compiler"],
                          capture_output=True, text=True, timeout=120)
    assert cache.dump.stat().st_size > 0, done.stderr[-2000:]
    assert "[cds]" not in done.stderr, done.stderr[:2000]
