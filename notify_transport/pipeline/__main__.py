"""``python -m notify_transport.pipeline run|report ...``: the same as ``notify-transport pipeline run|report``."""
from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from notify_transport.cli import main as cli_main

    return cli_main.main(["pipeline", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
