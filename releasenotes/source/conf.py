"""Sphinx configuration of notify-transport's release notes (reno), as OpenStack projects lay them out.

Build: ``sphinx-build -n -W -b html releasenotes/source releasenotes/build/html``
(``tox -e releasenotes``). The notes are YAML files in ``releasenotes/notes``
(``reno new SLUG`` creates one); reno reads them from the git history, so a
note shows once committed. The main documentation includes the same notes
(doc/source/releasenotes.rst).
"""
from __future__ import annotations

from importlib import metadata

project = "notify-transport Release Notes"
author = "notify-transport contributors"
copyright = "notify-transport contributors, Apache-2.0"
release = metadata.version("notify-transport")
version = ".".join(release.split(".")[:2])

extensions = ["reno.sphinxext"]
nitpicky = True
exclude_patterns: list[str] = []
html_theme = "alabaster"
html_static_path: list[str] = []
