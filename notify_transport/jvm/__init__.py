"""Jars from Maven Central (Apache Kafka's broker, Spark's Kafka connector), fetched once and cached,
and jars of this project's own Java sources (:mod:`.build`), compiled once and cached beside them."""
from notify_transport.jvm.artifacts import (ArtifactSet, JvmArtifactsError, cache_root, classpath,
                                            fetch)

__all__ = ["ArtifactSet", "JvmArtifactsError", "cache_root", "classpath", "fetch"]
