"""Drivers: one package per broker, all implementing :mod:`.base`."""
