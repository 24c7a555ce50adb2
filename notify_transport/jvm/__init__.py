"""Jars from Maven Central (Apache Kafka's broker), fetched once and cached."""
from notify_transport.jvm.artifacts import (ArtifactSet, JvmArtifactsError, cache_root, classpath,
                                            fetch)

__all__ = ["ArtifactSet", "JvmArtifactsError", "cache_root", "classpath", "fetch"]
