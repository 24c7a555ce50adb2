"""How a command's ``--help`` lays out its text: descriptions and examples as written.

The commands' descriptions and examples are laid out for a terminal
(paragraphs, indented example lines), so they are kept as they are, and an
option's default is shown when there is one worth showing.
"""
from __future__ import annotations

import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions and examples as written; shows a default when there is one to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, [], {}, argparse.SUPPRESS)
                or not action.option_strings or "%(default)" in text):
            return text
        return f"{text} (default: %(default)s)"
