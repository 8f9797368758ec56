"""The `specops` command line (bot/adapters/cli/main.py is the entry)."""

from bot.adapters.cli.main import app, main

__all__ = ["app", "main"]
