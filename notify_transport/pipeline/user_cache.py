"""The user's cache folder of this project: ``$XDG_CACHE_HOME/notify-transport`` (``~/.cache`` by default)."""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """Where the pipeline keeps what it makes once per machine (class archive, Spark home overlay)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "notify-transport"
