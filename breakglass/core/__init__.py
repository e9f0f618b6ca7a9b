"""Leaves every layer stands on: errors and exit codes, the outcome model, the journal, atomic files."""
