"""Diagnosis of what was read (a log, a paste, scrapes) and the checked inputs it takes."""
