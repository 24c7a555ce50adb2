"""A Spark home for local sessions whose Python workers import the installed PySpark.

Spark puts the package's ``python/lib/pyspark.zip`` first on every worker's path, and
Python caches no bytecode for a zip: each worker compiled PySpark (1.9 s against 0.4 s
here). :func:`prepared` links, once, everything of the package's Spark layout but
``python/lib`` into the user's cache; with it as ``SPARK_HOME`` workers import the
installed package. Spark then skips its ``pyspark_*`` data source search, so the
pipeline registers its sources itself.
"""
from __future__ import annotations

import hashlib
import logging
import shutil
import uuid
from pathlib import Path

from notify_transport import user_cache

LOG = logging.getLogger(__name__)

#: What a Spark home needs beside ``python``: its launch scripts, its jars and their data.
LINKED = ("bin", "sbin", "jars", "data", "examples", "licenses", "conf")


def package_home() -> Path:
    """The Spark layout inside the installed PySpark package (what PySpark uses by default)."""
    import pyspark

    return Path(pyspark.__file__).parent


def needs_overlay(home: Path) -> bool:
    """Whether ``home`` hands Spark's Python processes a zipped PySpark to compile."""
    return (home / "python" / "lib" / "pyspark.zip").is_file()


def prepared(root: Path | None = None, home: Path | None = None) -> Path | None:
    """The overlay of ``home`` (default: the installed package) under ``root``, made the first time.

    None when ``home`` has no zipped PySpark (nothing to gain) or the folder
    cannot be made (the session then uses ``home`` as before).
    """
    home = home or package_home()
    if not needs_overlay(home):
        return None
    root = root or user_cache.root()
    target = root / f"spark-home-{hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]}"
    if _complete(target, home):
        return target
    work = root / f".{target.name}.{uuid.uuid4().hex[:8]}"
    try:
        work.mkdir(parents=True)
        for name in LINKED:
            if (home / name).exists():
                (work / name).symlink_to(home / name)
        (work / "python").mkdir()
        if (home / "python" / "pyspark").exists():
            (work / "python" / "pyspark").symlink_to(home / "python" / "pyspark")
        try:
            work.rename(target)  # atomic: a racing process either wins or finds the folder made
        except OSError:
            if not _complete(target, home):
                raise
    except OSError as exc:
        LOG.debug("No Spark home overlay in %s: %s", root, exc)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _complete(target: Path, home: Path) -> bool:
    return all((target / name).resolve() == (home / name).resolve()
               for name in LINKED if (home / name).exists())
