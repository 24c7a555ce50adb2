"""``python -m notify_transport.pipeline run|report ...``: the pipeline CLI without the main tool."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from notify_transport.exceptions import ConfigurationError, MessagingException


def main(argv: Sequence[str] | None = None) -> int:
    from notify_transport.cli import pipeline_cmd

    parser = argparse.ArgumentParser(prog="python -m notify_transport.pipeline",
                                     description=pipeline_cmd.__doc__.split("\n\n")[1].replace("``", "'"))
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-v info, -vv debug)")
    pipeline_cmd.configure_parser(parser)
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(max(level, logging.WARNING))
    try:
        return int(args.func(args) or 0)
    except ConfigurationError as exc:
        print(f"pipeline: error: {exc}", file=sys.stderr)
        return 2
    except MessagingException as exc:
        print(f"pipeline: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
