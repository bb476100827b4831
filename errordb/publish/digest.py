"""SHA-256 of a file that can start from a state saved while hashing an earlier version of it.

``version.json`` gives each bulk download's SHA-256. A rebuild that changes one record rewrites
the downloads from that record on and keeps every byte before it, so hashing the whole file
again (1.6 GB at a million records) is mostly hashing what was hashed last time. Python's
``hashlib`` cannot export a hash's state, so :func:`checkpointed_sha256` drives the OpenSSL
library that ``hashlib`` itself uses, through ``ctypes``: its low-level
``SHA256_Init``/``Update``/``Final`` and their public ``SHA256_CTX`` struct (eight 32-bit
words of state, the message length in bits as two words, the 64-byte partial block, its
length, and the digest length, in the machine's byte order; the same layout since OpenSSL
0.9.8). The state is saved every :data:`CHECKPOINT` bytes; the next hash of a file that
starts with the same bytes goes on from the last state before its first changed byte. A hash
may also follow the file's writer (:class:`Written`, :class:`PublishedFile`): it reads each
byte as soon as the writer says it is final, so hashing goes on while the file is written.

Where that library is not found, lacks those functions, or fails the self-test on first use,
every file is hashed whole with ``hashlib``: the same digests, only without checkpoints.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: A state is saved at every multiple of this many bytes.
CHECKPOINT = 16 << 20
_CHUNK = 1 << 20
_CTX_SIZE = 112  # SHA256_CTX: h[8], Nl, Nh, data[16], num, md_len, all 32-bit
_CTX_FIELDS = struct.Struct("=8I2I64s2I")


@dataclass(frozen=True)
class Checkpoint:
    """The state of a SHA-256 after the first ``offset`` bytes of a file."""

    offset: int
    state: bytes


class Abandoned(Exception):
    """The writer a hash was following gave up its file (:meth:`Written.abandon`)."""


class Written:
    """How much of a file being written is final, as its writer says, for a hash that follows
    the writer (:func:`checkpointed_sha256`'s ``written``). The writer writes the file from one
    offset on, in order: bytes before the offset it passes to :meth:`advance` will not change.
    It ends with :meth:`complete` (the file's size), or with :meth:`abandon` when it fails or
    starts the file over (leaving it as a ``with`` block on an exception abandons it)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._final = 0
        self._size: int | None = None
        self._abandoned = False

    def advance(self, final: int) -> None:
        """The file's first ``final`` bytes are written and will not change."""
        with self._changed:
            if final > self._final and self._size is None:
                self._final = final
                self._changed.notify_all()

    def complete(self, size: int) -> None:
        """The file is written: ``size`` bytes (bytes past them, if any, are not the file's)."""
        with self._changed:
            self._final = self._size = size
            self._changed.notify_all()

    def abandon(self) -> None:
        """The writer gave up the file (or starts it over): a hash following it raises :class:`Abandoned`."""
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def __enter__(self) -> Written:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None:  # the writer failed: a hash waiting for more would wait forever
            self.abandon()

    def wait(self, position: int) -> tuple[int, bool]:
        """Wait until bytes past ``position`` are final, or the file is complete; returns how
        many first bytes are final, and whether they are the whole file. Raises
        :class:`Abandoned` when the writer gave up."""
        with self._changed:
            self._changed.wait_for(lambda: self._abandoned or self._size is not None or self._final > position)
            if self._abandoned:
                raise Abandoned
            return self._final, self._size is not None


class PublishedFile:
    """A file being written from its ``start`` offset on, in order, whose bytes are reported
    final (``written``) as they reach the file: on each flush, and piece by piece while
    :func:`errordb.publish.downloads.copy_range` copies into it. The file's own methods otherwise."""

    def __init__(self, file: IO[bytes], written: Written, start: int) -> None:
        self._file, self._written = file, written
        file.flush()
        written.advance(start)

    def write(self, data: bytes) -> int:
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()
        self._written.advance(self._file.tell())

    def published(self, end: int) -> None:
        """The bytes up to ``end`` were written into the file by the kernel."""
        self._written.advance(end)

    @property
    def name(self) -> str:
        return self._file.name  # type: ignore[return-value]

    def tell(self) -> int:
        return self._file.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def seekable(self) -> bool:
        return self._file.seekable()

    def fileno(self) -> int:
        return self._file.fileno()

    def truncate(self, size: int | None = None) -> int:
        return self._file.truncate(size)


def _state_is_for(state: bytes, offset: int) -> bool:
    """Whether ``state`` is a SHA256_CTX after ``offset`` bytes (its length fields say so)."""
    if len(state) != _CTX_SIZE:
        return False
    fields = _CTX_FIELDS.unpack(state)
    low, high, partial, digest_length = fields[8], fields[9], fields[11], fields[12]
    return (high << 32 | low) == offset * 8 and partial == offset % 64 and digest_length == 32


@functools.cache
def _openssl() -> Any:
    """OpenSSL's low-level SHA-256 functions, or None (then :func:`checkpointed_sha256` uses hashlib)."""
    try:
        import ctypes
        import ctypes.util

        import _hashlib  # the extension hashlib wraps: looking symbols up in it finds its libcrypto

        names = [_hashlib.__file__, ctypes.util.find_library("crypto")]
    except (ImportError, AttributeError):
        return None
    for name in names:
        if not name:
            continue
        try:
            library = ctypes.CDLL(name)
            functions = library.SHA256_Init, library.SHA256_Update, library.SHA256_Final
        except (OSError, AttributeError):
            continue
        functions[0].argtypes = [ctypes.c_void_p]
        functions[1].argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        functions[2].argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        for function in functions:
            function.restype = ctypes.c_int
        if _self_test(functions):
            return functions
    return None


def _self_test(functions: Any) -> bool:
    """Whether the functions give hashlib's digest, also across a saved and restored state, and
    keep their state in the layout :func:`_state_is_for` reads."""
    data = bytes(range(256)) * 41 + b"errordb"
    try:
        hasher = _Sha256(functions)
        hasher.update(data[:1001], 1001)
        state = hasher.state()
        resumed = _Sha256(functions, state)
        resumed.update(data[1001:], len(data) - 1001)
        return _state_is_for(state, 1001) and resumed.hexdigest() == hashlib.sha256(data).hexdigest()
    except Exception:  # noqa: BLE001 - any failure here only means: use hashlib
        return False


class _Sha256:
    """One SHA-256 in a SHA256_CTX of this process's memory (ctypes lets go of the GIL in each
    call, so two files hash side by side on two cores)."""

    def __init__(self, functions: Any, state: bytes | None = None):
        import ctypes

        self._init, self._update, self._final = functions
        self._context = ctypes.create_string_buffer(_CTX_SIZE)
        if state is None:
            if self._init(self._context) != 1:
                raise OSError("SHA256_Init failed")
        else:
            ctypes.memmove(self._context, state, _CTX_SIZE)

    def update(self, data: Any, length: int) -> None:
        """Hash the first ``length`` bytes of ``data`` (bytes, or a ctypes buffer)."""
        if length and self._update(self._context, data, length) != 1:
            raise OSError("SHA256_Update failed")

    def state(self) -> bytes:
        return self._context.raw

    def hexdigest(self) -> str:
        import ctypes

        digest = ctypes.create_string_buffer(32)
        if self._final(digest, self._context) != 1:
            raise OSError("SHA256_Final failed")
        return digest.raw.hex()


def resumable() -> bool:
    """Whether hashes can be resumed here (OpenSSL's functions were found and passed the self-test)."""
    return _openssl() is not None


def checkpointed_sha256(
    path: Path, earlier: Iterable[Checkpoint] = (), unchanged: int = 0, written: Written | None = None
) -> tuple[str, list[Checkpoint]]:
    """The SHA-256 (hex) of the file ``path``, and its checkpoints.

    ``earlier``: the checkpoints of an earlier file whose first ``unchanged`` bytes are this
    file's first bytes; hashing starts from the last of them at or before ``unchanged`` (one
    whose state does not say so is not used), and they are among the checkpoints returned.
    ``written``: the file is being written (from ``unchanged`` or earlier on); each byte is read
    once its writer says it is final, and the hash ends where the writer says the file ends.
    Without OpenSSL's functions the whole file is hashed with hashlib and there are none.
    """
    functions = _openssl()
    if functions is None:
        from errordb.atomic import file_sha256

        if written is None:
            return file_sha256(path), []
        final, whole = -1, False
        while not whole:
            final, whole = written.wait(final)
        return file_sha256(path, final), []  # to where its writer says the file ends
    import ctypes

    by_offset = {checkpoint.offset: checkpoint for checkpoint in earlier}
    kept: list[Checkpoint] = []  # the earlier ones usable here: every multiple of CHECKPOINT up to unchanged
    while (offset := (len(kept) + 1) * CHECKPOINT) <= unchanged:
        checkpoint = by_offset.get(offset)
        if checkpoint is None or not _state_is_for(checkpoint.state, offset):
            break
        kept.append(checkpoint)
    hasher = _Sha256(functions, kept[-1].state if kept else None)
    position = kept[-1].offset if kept else 0
    buffer = ctypes.create_string_buffer(_CHUNK)
    final, whole = (0, False) if written is not None else (-1, True)
    with open(path, "rb", buffering=0) as handle:
        handle.seek(position)
        while True:
            if position >= final >= 0:
                if whole:
                    if position != final:  # it was resumed past the file's end: not this file's hash
                        raise OSError(f"{path}: shorter than the bytes it was said to share")
                    break
                final, whole = written.wait(position)  # type: ignore[union-attr]
                continue
            # Reads end at each multiple of CHECKPOINT, where the state is saved.
            want = min(_CHUNK, CHECKPOINT - position % CHECKPOINT)
            if final >= 0:
                want = min(want, final - position)
            got = handle.readinto(memoryview(buffer)[:want])
            if not got:
                if final >= 0:
                    raise OSError(f"{path}: shorter than its writer says")
                break
            hasher.update(buffer, got)
            position += got
            if position % CHECKPOINT == 0:
                kept.append(Checkpoint(position, hasher.state()))
    return hasher.hexdigest(), kept
