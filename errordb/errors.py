"""Errors that errordb reports to users, as one line each."""

from __future__ import annotations


class ErrordbError(Exception):
    """A problem to show the user as one line; the CLI exits with :attr:`exit_code`."""

    exit_code = 2


class RecordError(ErrordbError):
    """A record file that cannot be used: names the file, the record and the field."""

    def __init__(self, source: str, record_id: str | None, field: str | None, problem: str):
        self.source = source
        self.record_id = record_id
        self.field = field
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        # A record whose id is unknown (unreadable, missing) is named by its file alone.
        parts = [self.source, *([f"record {self.record_id}"] if self.record_id else [])]
        if self.field:
            parts.append(self.field)
        return ": ".join(parts + [self.problem])


class NotFound(ErrordbError):
    """Nothing has the name the user gave (a record key); exit status 1, like grep finding nothing."""

    exit_code = 1
