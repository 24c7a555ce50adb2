"""The Spark home overlay: PySpark's Spark layout without the zipped PySpark its workers would compile."""
from __future__ import annotations

from pathlib import Path

from notify_transport.pipeline import spark_home


def fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "site-packages" / "pyspark"
    for name in ("bin", "sbin", "jars", "data"):
        (home / name).mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "jars" / "spark-core_2.13-4.2.0.jar").write_bytes(b"PK")
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"PK")
    (home / "python" / "pyspark").mkdir()
    return home


def test_the_overlay_links_sparks_layout_and_leaves_out_the_zips(tmp_path):
    home = fake_home(tmp_path)
    made = spark_home.prepared(tmp_path / "cache", home)
    assert made is not None and made.parent == tmp_path / "cache"
    assert (made / "bin" / "spark-submit").read_text() == "#!/bin/sh\n"
    assert (made / "jars").resolve() == (home / "jars").resolve()
    assert not (made / "python" / "lib").exists()
    assert not spark_home.needs_overlay(made)
    assert (made / "python" / "pyspark").resolve() == (home / "python" / "pyspark").resolve()
    # made once: the next session finds it, and no work folder is left behind
    assert spark_home.prepared(tmp_path / "cache", home) == made
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [made.name]


def test_a_home_without_a_zipped_pyspark_needs_no_overlay(tmp_path):
    home = fake_home(tmp_path)
    (home / "python" / "lib" / "pyspark.zip").unlink()
    assert spark_home.prepared(tmp_path / "cache", home) is None


def test_a_cache_that_cannot_be_written_leaves_the_session_on_the_package(tmp_path):
    home = fake_home(tmp_path)
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    assert spark_home.prepared(blocked, home) is None


def test_two_installations_get_two_overlays(tmp_path):
    first = fake_home(tmp_path / "a")
    second = fake_home(tmp_path / "b")
    assert spark_home.prepared(tmp_path / "cache", first) != spark_home.prepared(tmp_path / "cache", second)


def test_the_jar_cache_and_the_pipeline_share_the_users_cache_folder(monkeypatch, tmp_path):
    from notify_transport import user_cache
    from notify_transport.jvm import artifacts
    from notify_transport.pipeline import class_cache

    monkeypatch.delenv(artifacts.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache.root() == tmp_path / "notify-transport"
    assert artifacts.cache_root() == user_cache.root() / "jvm"
    assert class_cache.cache_dir().parent == user_cache.root()
    monkeypatch.setenv(artifacts.CACHE_ENV, str(tmp_path / "jars"))
    assert artifacts.cache_root() == tmp_path / "jars"
