"""``python -m notify_transport.jvm fetch NAME [-D key=value ...]``: fill the jar cache (the set-up runs it)."""
from __future__ import annotations

import argparse
import sys

from notify_transport.jvm.artifacts import JvmArtifactsError, classpath, fetch, with_defaults


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m notify_transport.jvm",
                                     description="Fetch a set of jars with Maven into the cache, "
                                                 "or print where the cached jars are.")
    parser.add_argument("action", choices=["fetch", "classpath"])
    parser.add_argument("name", help="a pom of notify_transport/jvm/poms, e.g. apache-kafka")
    parser.add_argument("-D", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                        help="a version property of the pom, e.g. -D kafka.version=4.1.1 (spark-kafka: "
                             "spark.version defaults to the installed PySpark's)")
    args = parser.parse_args(argv)
    properties = {}
    for item in args.properties:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"-D takes KEY=VALUE, got {item!r}")
        properties[key] = value
    artifacts = with_defaults(args.name, properties)
    try:
        jars = fetch(artifacts) if args.action == "fetch" else classpath(artifacts)
    except JvmArtifactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(":".join(str(jar) for jar in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
