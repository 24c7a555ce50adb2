"""Test listeners for notify-transport serve."""
