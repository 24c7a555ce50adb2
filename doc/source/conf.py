"""Sphinx configuration of the notify-transport documentation.

Build: ``sphinx-build -n -W -b html doc/source doc/build/html`` (or ``tox -e docs``):
nitpicky, so every cross-reference must resolve.
The configuration reference is generated from the options registered under
the ``oslo.config.opts`` entry point, so the package must be installed.
"""
from __future__ import annotations

import importlib
import os
import sys
import typing
from importlib import metadata

from docutils import nodes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

project = "notify-transport"
author = "notify-transport contributors"
copyright = "notify-transport contributors, Apache-2.0"
# setup.cfg is the source; the installed package's metadata carries it here
release = metadata.version("notify-transport")
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "oslo_config.sphinxext",
    "cliff.sphinxext",  # the CLI reference from the cliff commands (cli.rst)
    "reno.sphinxext",  # the release notes from releasenotes/notes (releasenotes.rst)
]

# the CLI reference: commands as "notify-transport COMMAND"; --help is not worth a line each
autoprogram_cliff_application = "notify-transport"
autoprogram_cliff_ignored = ["--help"]

#: quotes and ellipses only: "--option" must not become an en dash in the CLI reference
smartquotes_action = "qe"

# -- cross-references to Python's and oslo.config's documentation ---------------------
# The builds run offline (CI, tox), so an inventory is used only where it can be
# read without the network: a local copy named by NOTIFY_TRANSPORT_INTERSPHINX_<NAME>
# (e.g. NOTIFY_TRANSPORT_INTERSPHINX_PYTHON=/usr/share/doc/python3/html/objects.inv),
# or the URL itself when NOTIFY_TRANSPORT_DOCS_ONLINE=1. An inventory that cannot be
# fetched makes Sphinx warn, which -W turns into a failure; hence no unconditional URL.
_INVENTORIES = {
    "python": "https://docs.python.org/3",
    "oslo.config": "https://docs.openstack.org/oslo.config/latest",
}
_ONLINE = os.environ.get("NOTIFY_TRANSPORT_DOCS_ONLINE") == "1"
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
for _name, _url in _INVENTORIES.items():
    _local = os.environ.get("NOTIFY_TRANSPORT_INTERSPHINX_" + _name.replace(".", "_").upper())
    if _local and os.path.exists(_local):
        intersphinx_mapping[_name] = (_url, _local)
    elif _ONLINE:
        intersphinx_mapping[_name] = (_url, None)

nitpicky = True
# Without an inventory, references to Python's standard library and to oslo.config's
# types (from signatures and type hints) cannot resolve offline: ignore only those.
# Every reference to notify-transport's own objects must still resolve.
nitpick_ignore_regex: list[tuple[str, str]] = []
if "python" not in intersphinx_mapping:
    nitpick_ignore_regex += [
        (r"py:(class|obj|exc|data|func|meth)", _stdlib) for _stdlib in (
            r"(datetime|logging|threading|types|typing|collections\.abc|queue|abc)\..+",
            r"(Any|Callable|Iterable|Iterator|Mapping|Sequence|TracebackType|NamedTuple|TypeVar)",
            r"(int|str|float|bool|bytes|dict|list|tuple|set|object|None|type|BaseException|Exception"
            r"|ValueError|KeyError|RuntimeError|TypeError|StopIteration)",
        )]
if "oslo.config" not in intersphinx_mapping:
    nitpick_ignore_regex += [(r"py:(class|obj|exc)", r"(oslo_config\.)?cfg\..+"),
                             (r"py:(class|obj|exc)", r"oslo_config\..+")]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Base classes are not listed (several are internal mixins); leaving the option out
# keeps them hidden (a False value would still switch it on).
autodoc_default_options: dict[str, object] = {}


def _documented_alias(app, env, node, contnode):
    """Resolve a reference to one of our objects by the public name it is documented under.

    Type hints name an object where it is defined (``notify_transport.drivers.kafka.delivery.hooks.
    ListenerHooks``); the API reference documents it where users import it from
    (``notify_transport.kafka.ListenerHooks``). A reference that names no documented
    object (or, for a relative name, the object it names in the module being documented)
    is looked up by identity among the documented ones; type variables (``F`` of
    a decorator) have no page and are shown as plain text. Anything else stays missing,
    so -n still reports it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("notify_transport."):  # relative to the documented module
        target = f"{node.get('py:module') or ''}.{target.lstrip('.~')}"
        if not target.startswith("notify_transport."):
            return None
    obj = _import_dotted(target)
    if obj is None:
        return None
    if isinstance(obj, typing.TypeVar):
        return nodes.literal(text=obj.__name__)
    domain = env.get_domain("py")
    for name, entry in domain.objects.items():
        if name.startswith("notify_transport.") and _import_dotted(name) is obj:
            node["reftarget"] = name
            return domain.resolve_xref(env, node.get("refdoc", ""), app.builder, node["reftype"],
                                       name, node, contnode)
    return None


def _import_dotted(name: str) -> object | None:
    """The object a dotted name names, or None (the longest importable module, then attributes)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def setup(app):
    app.connect("missing-reference", _documented_alias)

exclude_patterns: list[str] = []
html_theme = "alabaster"
html_theme_options = {"description": "OpenStack notifications over Kafka, RPC over RabbitMQ"}
html_static_path: list[str] = []
