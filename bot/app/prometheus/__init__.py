"""Prometheus as a source: its text, its queries as people type them, what specops exports beside it."""
