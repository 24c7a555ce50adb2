"""Sphinx configuration of the notify-transport documentation.

Build: ``sphinx-build -W -b html doc/source doc/build/html`` (or ``tox -e docs``).
The configuration reference is generated from the options registered under
the ``oslo.config.opts`` entry point, so the package must be installed.
"""
from __future__ import annotations

import configparser
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

_setup = configparser.ConfigParser()
_setup.read(os.path.join(ROOT, "setup.cfg"))

project = "notify-transport"
author = "notify-transport contributors"
copyright = "notify-transport contributors, Apache-2.0"
release = _setup.get("metadata", "version", fallback="0")
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "oslo_config.sphinxext",
    "sphinxarg.ext",  # sphinx-argparse: the CLI reference from the parser (cli.rst)
]

#: quotes and ellipses only: "--option" must not become an en dash in the CLI reference
smartquotes_action = "qe"

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}

exclude_patterns: list[str] = []
html_theme = "alabaster"
html_theme_options = {"description": "OpenStack notifications over Kafka, RPC over RabbitMQ"}
html_static_path: list[str] = []
