"""Reviewed reproductions of records, run in a sandbox."""
