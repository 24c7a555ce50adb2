"""RPC API version compatibility, with oslo.messaging's rules."""
from __future__ import annotations


def version_is_compatible(imp_version: str | None, version: str | None) -> bool:
    """Whether an implementation at ``imp_version`` can serve a request for ``version``.

    Same major version, and the requested minor (then revision) no higher than
    the implemented one. ``imp_version`` None accepts everything; a request
    without a version is accepted by nothing else.
    """
    if imp_version is None:
        return True
    if version is None:
        return False
    version_parts = version.split(".")
    imp_version_parts = imp_version.split(".")
    rev = version_parts[2] if len(version_parts) > 2 else 0
    imp_rev = imp_version_parts[2] if len(imp_version_parts) > 2 else 0
    if int(version_parts[0]) != int(imp_version_parts[0]):
        return False
    if int(version_parts[1]) > int(imp_version_parts[1]):
        return False
    if int(version_parts[1]) == int(imp_version_parts[1]) and int(rev) > int(imp_rev):
        return False
    return True
