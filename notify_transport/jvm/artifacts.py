"""JVM pieces from Maven Central, fetched once with Maven and kept in a cache.

Apache Kafka's broker is published as jars, not as a download this project may rely
on. :func:`fetch` runs ``mvn dependency:copy-dependencies`` once on a pom shipped in
``notify_transport/jvm/poms/`` and keeps the jars under a name made of the pom and its
versions, so later calls need neither Maven nor the network; :func:`classpath` only looks.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Mapping, Sequence

from notify_transport import user_cache

LOG = logging.getLogger(__name__)

#: Environment variable that moves the jar cache (default: ``jvm`` in the user's cache folder).
CACHE_ENV = "NOTIFY_TRANSPORT_JVM_CACHE"
#: The file written last into a complete cache entry: the jar names, one per line.
MANIFEST = "jars.txt"
#: Seconds one Maven run may take (a first fetch on a slow mirror).
MAVEN_TIMEOUT = 900.0


class JvmArtifactsError(RuntimeError):
    """A set of jars is not in the cache, or Maven could not fetch it (the message says which)."""


@dataclass(frozen=True)
class ArtifactSet:
    """One pom of ``poms/`` and the version properties it is fetched with."""

    name: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def pom_text(self) -> str:
        try:
            return resources.files(__package__).joinpath("poms", f"{self.name}.xml").read_text()
        except FileNotFoundError:
            known = sorted(p.name[:-4] for p in resources.files(__package__).joinpath("poms").iterdir()
                           if p.name.endswith(".xml"))
            raise JvmArtifactsError(f"no pom named {self.name!r}; known: {', '.join(known)}") from None

    def key(self) -> str:
        """Cache entry name: changes whenever the pom or a property changes."""
        digest = hashlib.sha256(self.pom_text().encode())
        digest.update(json.dumps(sorted(self.properties.items())).encode())
        return f"{self.name}-{digest.hexdigest()[:12]}"

    def describe(self) -> str:
        props = " ".join(f"{k}={v}" for k, v in sorted(self.properties.items()))
        return f"{self.name}{' ' + props if props else ''}"


def _installed_pyspark() -> dict[str, str]:
    """Spark's Kafka connector at the installed PySpark's version: the only one a session can load."""
    from importlib import metadata

    try:
        return {"spark.version": metadata.version("pyspark")}
    except metadata.PackageNotFoundError:
        return {}


#: Version properties a pom is fetched with when the caller gives none (``-D`` overrides each).
DEFAULT_PROPERTIES: Mapping[str, Callable[[], dict[str, str]]] = {"spark-kafka": _installed_pyspark}


def with_defaults(name: str, properties: Mapping[str, str]) -> ArtifactSet:
    """The jar set of pom ``name``: ``properties`` over the pom's defaults (:data:`DEFAULT_PROPERTIES`)."""
    defaults = DEFAULT_PROPERTIES.get(name)
    return ArtifactSet(name, {**(defaults() if defaults else {}), **properties})


def cache_root() -> Path:
    """Where fetched and built jars are kept: ``$NOTIFY_TRANSPORT_JVM_CACHE``, else ``jvm`` under
    :func:`notify_transport.user_cache.root`."""
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else user_cache.root() / "jvm"


def _cached(entry: Path) -> list[Path] | None:
    """The jars of a complete entry, or None when it is missing or was left half-written."""
    try:
        names = (entry / MANIFEST).read_text().split()
    except OSError:
        return None
    jars = [entry / "jars" / name for name in names]
    return jars if jars and all(jar.is_file() for jar in jars) else None


def classpath(artifacts: ArtifactSet) -> list[Path]:
    """The cached jars of ``artifacts``; :class:`JvmArtifactsError` naming the set-up step if absent."""
    jars = _cached(cache_root() / artifacts.key())
    if jars is None:
        raise JvmArtifactsError(
            f"the jars of {artifacts.describe()} are not in {cache_root()}: run "
            f"`python -m notify_transport.jvm fetch {artifacts.name}` (make setup does) first")
    return jars


def fetch(artifacts: ArtifactSet, maven: str | None = None) -> list[Path]:
    """The jars of ``artifacts``, fetched with Maven the first time (idempotent, safe to race)."""
    entry = cache_root() / artifacts.key()
    jars = _cached(entry)
    if jars is not None:
        return jars
    maven = require_tool(maven, "mvn", f"Maven (mvn) is needed to fetch {artifacts.describe()}: "
                         "apt-get install maven")

    def fill(work: Path) -> None:
        (work / "pom.xml").write_text(artifacts.pom_text())
        LOG.info("Fetching %s with Maven", artifacts.describe())
        run_tool([maven, "-B", "-q", "-f", str(work / "pom.xml"),
                  *(f"-D{k}={v}" for k, v in sorted(artifacts.properties.items())),
                  "dependency:copy-dependencies", "-DincludeScope=runtime",
                  f"-DoutputDirectory={work / 'jars'}"],
                 MAVEN_TIMEOUT, f"Maven could not fetch {artifacts.describe()}")
        names = sorted(p.name for p in (work / "jars").glob("*.jar"))
        if not names:
            raise JvmArtifactsError(f"Maven fetched no jar for {artifacts.describe()}")
        (work / MANIFEST).write_text("\n".join(names) + "\n")

    fill_entry(entry, lambda: _cached(entry) is not None, fill)
    jars = _cached(entry)
    assert jars is not None
    return jars


def require_tool(given: str | None, name: str, missing: str) -> str:
    """``given``, else the program ``name`` found on PATH; :class:`JvmArtifactsError` saying ``missing``."""
    found = given or shutil.which(name)
    if not found:
        raise JvmArtifactsError(missing)
    return found


def fill_entry(entry: Path, complete: Callable[[], bool], fill: Callable[[Path], None]) -> None:
    """Make the cache entry ``entry`` with ``fill`` in a work folder beside it, renamed into place
    when done: a run killed halfway leaves no entry that looks complete, and of two runs racing
    the first rename wins (``complete`` tells whether the entry another run left is whole)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    if entry.exists() and not complete():  # left half-written by a run that was killed
        shutil.rmtree(entry, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    try:
        fill(work)
        try:
            work.rename(entry)
        except OSError:
            if not complete():  # another process completed the same entry first: keep its copy
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_tool(command: Sequence[str], timeout: float, failure: str) -> None:
    """Run a JVM tool (Maven, javac); :class:`JvmArtifactsError` with ``failure`` and the tool's last
    lines when it fails."""
    done = subprocess.run(list(command), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise JvmArtifactsError(f"{failure} (exit {done.returncode}):\n{tail}")
