"""Typed results of the use cases: pure data, rendered by bot/present."""
