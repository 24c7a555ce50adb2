"""The user's cache folder of this project: ``$XDG_CACHE_HOME/notify-transport`` (``~/.cache`` by default).

One home for it, because both the JVM pieces (fetched and built jars) and the pipeline
(class archive, Spark home overlay) keep there what they make once per machine.
"""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The folder under which each part keeps its own subfolder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "notify-transport"
