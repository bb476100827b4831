"""Draft records from the raise sites of a Python source tree."""
