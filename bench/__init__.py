"""Benchmarks of notify-transport against oslo.messaging 18.3.1 and the raw clients.

Run ``python -m bench`` from the repository root (or ``make bench``, ``tox -e bench``);
see ``bench/README.md``.
"""
