"""A class-data-sharing archive of the driver JVM's classes, so a local run starts sooner.

Java's dynamic CDS writes the loaded classes at exit (``-XX:ArchiveClassesAtExit``) and
maps them in the next JVM: about 2 s off a session's start here. One archive per PySpark
and Java lives in the user's cache (about 150 MB), adopted once the JVM that wrote it
exited. ``-Xshare:auto`` ignores an archive that does not match, so a stale one only
costs the time it would have saved.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from notify_transport import user_cache

LOG = logging.getLogger(__name__)

#: a dump still unfinished after this long is given up
STALE_SECONDS = 3600
#: JVM unified logging: warnings to stderr only (the CLI prints its summary on stdout)
LOG_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
#: The same while writing an archive, without the class-sharing warnings: the dump names each class
#: it leaves out (from a signed jar, of an old class file version), some 1,400 lines for Spark's,
#: none of which the user can act on; its errors still show
LOG_TO_STDERR_DUMPING = "-Xlog:disable -Xlog:all=warning,cds*=error:stderr"


def cache_dir() -> Path:
    return user_cache.root() / "spark-cds"


def _key() -> str:
    import pyspark

    java = os.environ.get("JAVA_HOME") or shutil.which("java") or ""
    # the class path the JVM checks the archive against comes from SPARK_HOME (see .spark_home)
    text = "|".join((pyspark.__version__, os.path.dirname(pyspark.__file__), os.path.realpath(java),
                     os.environ.get("SPARK_HOME", "")))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClassCache:
    """The archive of this PySpark installation: the JVM options that use it or write it."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()
        self.key = _key()
        self.archive = self.root / f"{self.key}.jsa"
        self.dump: Path | None = None

    def java_options(self) -> str:
        """``-XX:SharedArchiveFile`` when an archive exists, else ``-XX:ArchiveClassesAtExit``."""
        try:
            pending = self._adopt_finished_dumps()
            if self.archive.is_file():
                return f"-XX:SharedArchiveFile={self.archive} -Xshare:auto {LOG_TO_STDERR}"
            if pending:  # one archive is being written: do not write another
                return LOG_TO_STDERR
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            LOG.debug("No class-data-sharing archive: %s", exc)
            return LOG_TO_STDERR
        self.dump = self.root / f"{self.key}.{uuid.uuid4().hex[:8]}.dump"
        return f"-XX:ArchiveClassesAtExit={self.dump} {LOG_TO_STDERR_DUMPING}"

    def started(self, jvm_pid: int) -> None:
        """Note which JVM writes :attr:`dump`, so a later run adopts it only after that JVM exited."""
        if self.dump is not None:
            try:
                self.dump.with_suffix(".pid").write_text(str(jvm_pid))
            except OSError as exc:
                LOG.debug("Cannot note the JVM writing %s: %s", self.dump, exc)

    def _adopt_finished_dumps(self) -> int:
        """Make the first complete dump the archive, drop the others; return how many are pending.

        A dump is complete when the JVM that noted itself as its writer has
        exited. One without a writer, or older than :data:`STALE_SECONDS`, is
        dropped (its JVM never started, or its pid is not reaped).
        """
        pending = 0
        for dump in sorted(self.root.glob(f"{self.key}.*.dump")):
            marker = dump.with_suffix(".pid")
            try:
                pid = int(marker.read_text()) if marker.exists() else None
            except (OSError, ValueError):
                pid = None
            stale = time.time() - dump.stat().st_mtime > STALE_SECONDS
            if pid is not None and _alive(pid) and not stale:
                pending += 1
                continue
            if pid is None and not stale:
                pending += 1  # its JVM is starting
                continue
            if pid is not None and not _alive(pid) and not self.archive.exists() and dump.stat().st_size > 0:
                os.replace(dump, self.archive)
                LOG.info("Class-data-sharing archive %s ready", self.archive)
            else:
                dump.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
        return pending
