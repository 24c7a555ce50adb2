"""Listener entries that fail: one does not import, one raises when built."""


def make_unbuildable():
    raise RuntimeError("the billing database is unreachable")
