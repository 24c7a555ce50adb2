"""``python -m bench``: see bench/run.py and bench/README.md."""
import sys

from bench.run import main

sys.exit(main())
