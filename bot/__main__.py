"""`python -m bot` is the `specops` command."""

from bot.adapters.cli import main

main()
