"""Jars of this project's own Java code, compiled with ``javac`` and kept in the jar cache.

The sources ship in the package (``notify_transport/jvm/src/<name>/``) and are
compiled against jars already on the machine (for the pipeline's decoder, the
installed PySpark's), so nothing is downloaded and the classes match the Spark
that runs them. An entry is named after the sources, the jars compiled against
and the target release: editing a source or upgrading PySpark builds a new jar,
anything else finds the cached one. :func:`cached_jar` only looks.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import shutil
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from notify_transport.jvm.artifacts import JvmArtifactsError, cache_root, fill_entry, require_tool, run_tool

LOG = logging.getLogger(__name__)

#: The Java release the classes are compiled for: Spark 4 runs on 17 and later.
RELEASE = "17"
#: Seconds one compilation may take.
JAVAC_TIMEOUT = 300.0


@dataclass(frozen=True)
class JavaSources:
    """The Java sources under ``src/<name>`` (or ``root``) and the jars they compile against."""

    name: str
    classpath: tuple[Path, ...]
    root: Path | None = None

    def files(self) -> list[tuple[str, bytes]]:
        """``(relative path, content)`` of every ``.java`` file, sorted."""
        root = self.root if self.root is not None else resources.files(__package__).joinpath("src", self.name)
        found: list[tuple[str, bytes]] = []

        def walk(folder, prefix: str) -> None:
            for item in folder.iterdir():
                if item.is_dir():
                    walk(item, f"{prefix}{item.name}/")
                elif item.name.endswith(".java"):
                    found.append((prefix + item.name, item.read_bytes()))

        try:
            walk(root, "")
        except FileNotFoundError:
            raise JvmArtifactsError(f"no Java sources named {self.name!r}") from None
        if not found:
            raise JvmArtifactsError(f"no Java sources named {self.name!r}")
        return sorted(found)

    @functools.cached_property
    def key(self) -> str:
        """Cache entry name: changes with a source, a jar compiled against, or the release (hashed once)."""
        digest = hashlib.sha256(RELEASE.encode())
        for path, content in self.files():
            digest.update(path.encode() + b"\0" + hashlib.sha256(content).digest())
        for jar in sorted(Path(j).name for j in self.classpath):
            digest.update(jar.encode() + b"\0")
        return f"{self.name}-build-{digest.hexdigest()[:12]}"


def cached_jar(sources: JavaSources) -> Path | None:
    """The built jar of ``sources`` when the cache holds it, else None (nothing is compiled)."""
    jar = cache_root() / sources.key / f"{sources.name}.jar"
    return jar if jar.is_file() else None


def build(sources: JavaSources, javac: str | None = None) -> Path:
    """The jar of ``sources``, compiled the first time (idempotent, safe to race).

    Raises :class:`JvmArtifactsError` when no ``javac`` is found (a JDK, not
    only a runtime, is needed) or when compilation fails, with javac's words.
    """
    found = cached_jar(sources)
    if found is not None:
        return found
    javac = require_tool(javac, "javac", f"javac is needed to build the {sources.name} jar: install a JDK "
                         "(apt-get install openjdk-17-jdk-headless)")
    files = sources.files()

    def fill(work: Path) -> None:
        source_dir, classes = work / "src", work / "classes"
        for path, content in files:
            target = source_dir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        LOG.info("Compiling the %s jar with %s", sources.name, javac)
        run_tool([javac, "--release", RELEASE, "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
                  "-cp", ":".join(str(j) for j in sources.classpath),
                  *(str(source_dir / path) for path, _ in files)],
                 JAVAC_TIMEOUT, f"javac could not build the {sources.name} jar")
        _write_jar(classes, work / f"{sources.name}.jar")
        shutil.rmtree(classes)

    fill_entry(cache_root() / sources.key, lambda: cached_jar(sources) is not None, fill)
    jar = cached_jar(sources)
    assert jar is not None
    return jar


def _write_jar(classes: Path, jar: Path) -> None:
    """A jar is a zip with a manifest first; the JDK's ``jar`` tool is not needed for that."""
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: notify-transport\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())


def jars_named(folder: Path, prefixes: Sequence[str]) -> tuple[Path, ...]:
    """The jars of ``folder`` whose names start with one of ``prefixes`` (a compile classpath)."""
    jars = tuple(sorted(j for j in folder.glob("*.jar") if j.name.startswith(tuple(prefixes))))
    missing = [p for p in prefixes if not any(j.name.startswith(p) for j in jars)]
    if missing:
        raise JvmArtifactsError(f"{folder} has no jar named {', '.join(missing)}*")
    return jars
