"""Reading record files: one envelope per ``.json`` file, or one per line of a ``.jsonl`` file.

Everything that can be wrong with a file becomes a :class:`~errordb.errors.RecordError` that
names the file (and line, for JSON Lines), the record id when it could be read, and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errordb.errors import ErrordbError, RecordError
from errordb.text import printable

if TYPE_CHECKING:  # pydantic is imported when a record is validated, not to walk a folder
    from errordb.records.schema import Envelope

RECORD_SUFFIXES = (".json", ".jsonl")
#: Folders inside a records tree that hold other things than records (reviewed reproductions).
NON_RECORD_DIRS = frozenset({"repros"})
#: A record file larger than this is refused before it is parsed.
MAX_FILE_BYTES = 64 << 20
#: How much of a file is read to name the record in an error about the whole file.
_PEEK_BYTES = 4096
#: The read buffer of a JSON Lines file.
READ_BUFFER_BYTES = 1 << 20

# Errors are one line on a terminal. File names come from contributors and pydantic's or RE2's
# messages can quote record text, so control characters in them are shown as \x.. escapes.
# What a model-level check names as its field: "lineNumber: ..." or "solutions[2]: ...".
_FIELD_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?$")
# A record id or a key, found in text that is not valid JSON (to name them in the error).
_ID_IN_TEXT = re.compile(r'"id"\s*:\s*"([0-9a-f]{16})"')
_KEY_IN_TEXT = re.compile(r'(?<!\\)"([A-Za-z]+)"\s*:')


def _name(path: os.PathLike[str] | str) -> str:
    return printable(str(path))


@dataclass(frozen=True)
class LoadedRecord:
    """A validated envelope and where it came from (``path`` or ``path:line``)."""

    source: str
    envelope: Envelope

    @property
    def record(self):
        return self.envelope.record


def record_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Every record file under ``paths`` (files as given, folders walked in sorted order).

    A path given twice, or inside a folder also given, is read once: its records are not
    duplicates of themselves.
    """
    for path in _distinct(list(map(Path, paths))):
        if path.is_dir():
            yield from _walk(path)
        elif path.exists():
            yield path
        else:
            raise RecordError(_name(path), None, None, "no such file or folder")


def count_records(paths: Iterable[str | os.PathLike[str]]) -> int | None:
    """How many records the files under ``paths`` hold, cheaply (a progress bar's total).

    A ``.json`` file is one record; a ``.jsonl`` file is counted by its newlines (read in 1 MiB
    blocks, far faster than parsing it). An estimate: blank lines count too. ``None`` when the
    paths cannot be walked (reading them then reports the problem).
    """
    total = 0
    try:
        for path in record_files(paths):
            if path.suffix != ".jsonl":
                total += 1
                continue
            with open(path, "rb") as handle:
                last = b"\n"
                while block := handle.read(1 << 20):
                    total += block.count(b"\n")
                    last = block[-1:]
                total += last != b"\n"  # a last line without its newline
    except (OSError, RecordError):
        return None
    return total


def _distinct(paths: list[Path]) -> list[Path]:
    """``paths`` without repeats, and without those a folder among them already walks to."""
    resolved = [path.resolve() for path in paths]
    folders = [where for where, path in zip(resolved, paths) if path.is_dir()]
    kept: list[Path] = []
    taken: set[Path] = set()
    for path, where in zip(paths, resolved):
        # A path that does not exist is kept: reading it says so.
        if where in taken or (path.exists() and any(_walks_to(folder, where) for folder in folders)):
            continue
        taken.add(where)
        kept.append(path)
    return kept


def _walks_to(folder: Path, target: Path) -> bool:
    """Whether :func:`_walk` of ``folder`` reaches ``target`` (both resolved, so no symlinks)."""
    if target == folder or folder not in target.parents:
        return False
    *folders, name = target.relative_to(folder).parts
    if any(part.startswith((".", "_")) or part in NON_RECORD_DIRS for part in folders) or name.startswith((".", "_")):
        return False
    return name not in NON_RECORD_DIRS if target.is_dir() else name.endswith(RECORD_SUFFIXES)


def _walk(folder: Path) -> Iterator[Path]:
    # os.scandir in sorted order keeps the walk deterministic and lazy for millions of files.
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise RecordError(_name(folder), None, None, f"cannot read folder: {exc.strerror}") from None
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in NON_RECORD_DIRS:
                yield from _walk(Path(entry.path))
        elif entry.name.endswith(RECORD_SUFFIXES) and entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def load_records(paths: Iterable[str | os.PathLike[str]]) -> Iterator[LoadedRecord]:
    """Validate and yield every record under ``paths``, raising on the first bad one."""
    for path in record_files(paths):
        yield from load_file(path)


def load_file(path: Path) -> Iterator[LoadedRecord]:
    """The records of one ``.json`` file, or of a ``.jsonl`` file read line by line."""
    for source, text in file_texts(path):
        yield LoadedRecord(source, parse_envelope(source, text))


def record_texts(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, str]]:
    """``(source, JSON text)`` of every record under ``paths``, read and decoded but not parsed.

    Ingest parses and validates them elsewhere (in worker processes); a file that cannot be
    read raises here, in its place in the sequence.
    """
    for path in record_files(paths):
        yield from file_texts(path)


def file_texts(path: Path) -> Iterator[tuple[str, str]]:
    """``(source, text)`` of one ``.json`` file, or of each non-blank line of a ``.jsonl`` file."""
    if path.suffix == ".jsonl":
        yield from _lines(path)
        return
    source = _name(path)
    yield source, _decode(source, _read_bytes(path))


def _lines(path: Path) -> Iterator[tuple[str, str]]:
    # Streamed: a JSON Lines file of a million records is never held in memory at once.
    try:
        # A 1 MB buffer: with the default 8 KiB, each ~5 KB record line costs a read call
        # (100,000 lines read in a third of the time).
        handle = open(path, "rb", buffering=READ_BUFFER_BYTES)
    except OSError as exc:
        raise RecordError(_name(path), None, None, f"cannot read: {exc.strerror}") from None
    name = _name(path)
    with handle:
        number = 0
        # readline with a limit: one endless line costs MAX_FILE_BYTES of memory, not the file.
        while raw := handle.readline(MAX_FILE_BYTES + 1):
            number += 1
            source = f"{name}:{number}"
            if len(raw) > MAX_FILE_BYTES:
                raise RecordError(source, _peek_id_text(raw[:_PEEK_BYTES]), None, f"line is longer than {MAX_FILE_BYTES} bytes; a record is limited to {MAX_FILE_BYTES}")
            line = _decode(source, raw)
            if line.strip():
                yield source, line


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            with open(path, "rb") as handle:
                head = handle.read(_PEEK_BYTES)
            raise RecordError(_name(path), _peek_id_text(head), None, f"file is {size} bytes; record files are limited to {MAX_FILE_BYTES}")
        return path.read_bytes()
    except OSError as exc:
        raise RecordError(_name(path), None, None, f"cannot read: {exc.strerror}") from None


def _decode(source: str, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        raise RecordError(source, _peek_id_text(data[:_PEEK_BYTES]), None, "starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        field = _key_before(data[: exc.start].decode("utf-8", "replace"))
        raise RecordError(source, _peek_id_text(text), field, f"not valid UTF-8 at byte {exc.start}") from None


def _peek_id_text(text: str | bytes) -> str | None:
    """The record id in text that is not (yet) valid JSON, when it can be read."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = _ID_IN_TEXT.search(text)
    return found.group(1) if found else None


def _key_before(text: str) -> str | None:
    """The record field whose value holds the end of ``text`` (the last key before it).

    A heuristic for errors in text that does not parse: only the names of the envelope's and
    the record's own fields count, so text that merely looks like a key is rarely taken.
    """
    from errordb.records.schema import FIELD_NAMES

    for found in reversed(list(_KEY_IN_TEXT.finditer(text))):
        if found.group(1) in FIELD_NAMES or found.group(1) == "datasetVersion":
            return found.group(1)
    return None


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) == len(pairs):  # the common case, at C speed
        return result
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    return result


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def parse_envelope(source: str, text: str) -> Envelope:
    """Parse and validate one envelope's JSON text; ``source`` names it in errors."""
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise RecordError(source, _peek_id_text(text), _key_before(text[: exc.pos]), f"malformed JSON: {exc.msg} at {where}") from None
    except (ValueError, RecursionError) as exc:
        field = exc.key if isinstance(exc, _DuplicateKey) and _FIELD_PREFIX.match(exc.key) else None
        raise RecordError(source, _peek_id_text(text), field, printable(f"malformed JSON: {exc}")) from None
    return validate_envelope(source, data)


def validate_envelope(source: str, data: Any) -> Envelope:
    """Validate decoded JSON as an envelope, turning pydantic's errors into one RecordError."""
    from pydantic import ValidationError

    from errordb.records.schema import Envelope

    record_id = _peek_id(data)
    try:
        return Envelope.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = _field_name(first["loc"])
        message = first["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        # Model-level checks name their own field as "field: problem".
        if field is None and ": " in message and _FIELD_PREFIX.match(message.split(": ", 1)[0]):
            field, message = message.split(": ", 1)
        message = printable(message)
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise RecordError(source, record_id, field, message) from None


def _field_name(loc: tuple) -> str | None:
    """pydantic's error location as a field name: ``("record", "tags", 0)`` is ``tags[0]``; an
    unknown field's name is the file's text, so its control characters are escaped."""
    name = ""
    for part in loc[1:] if loc[:1] == ("record",) else loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return printable(name) or None


def _peek_id(data: Any) -> str | None:
    record = data.get("record") if isinstance(data, dict) else None
    value = record.get("id") if isinstance(record, dict) else None
    # Only echo an id that looks like one: the id goes into a one-line terminal message.
    if isinstance(value, str) and len(value) == 16 and all(c in "0123456789abcdef" for c in value):
        return value
    return None


def bundled_records_dir() -> Path:
    """The records shipped with errordb: inside the installed package, or the source checkout's."""
    package = Path(__file__).resolve().parents[1]  # errordb/
    for candidate in (package / "_bundled" / "records", package.parent / "records"):
        if candidate.is_dir():
            return candidate
    raise ErrordbError("the bundled records are missing from this installation; pass --db")
