"""A throwaway self-signed certificate for tests of the TLS options (made with the openssl CLI)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def self_signed_certificate(directory: Path) -> tuple[Path, Path] | None:
    """``(key, certificate)`` PEM files in ``directory``, or None when openssl cannot make them.

    The certificate names ``localhost`` and ``127.0.0.1`` (subject alternative
    names), so a client that checks the host it dialled accepts it on loopback.
    """
    if shutil.which("openssl") is None:
        return None
    key, cert = directory / "key.pem", directory / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "1",
                           "-keyout", str(key), "-out", str(cert)],
                          capture_output=True, check=False, timeout=60)
    return (key, cert) if made.returncode == 0 else None
