"""Explaining a traceback: parse it, match it against the store, render the answer."""
