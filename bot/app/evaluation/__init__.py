"""What the diagnosis knows and how right it is: `specops kb` and `specops eval`."""
