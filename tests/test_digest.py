"""SHA-256 resumed from saved states (errordb.publish.digest) gives hashlib's digest, whatever it is given."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import pytest

from errordb.publish import digest
from errordb.publish.digest import Checkpoint, checkpointed_sha256

pytestmark = pytest.mark.skipif(not digest.resumable(), reason="OpenSSL's SHA256_* functions are not reachable here")


@pytest.fixture
def small_checkpoints(monkeypatch):
    monkeypatch.setattr(digest, "CHECKPOINT", 4096)
    monkeypatch.setattr(digest, "_CHUNK", 1000)  # reads that do not divide the checkpoints


def test_a_whole_file_gives_hashlibs_digest_and_a_state_at_each_checkpoint(tmp_path, small_checkpoints):
    data = os.urandom(5 * 4096 + 77)
    (tmp_path / "f").write_bytes(data)
    found, checkpoints = checkpointed_sha256(tmp_path / "f")
    assert found == hashlib.sha256(data).hexdigest()
    assert [checkpoint.offset for checkpoint in checkpoints] == [4096 * n for n in range(1, 6)]
    assert all(digest._state_is_for(checkpoint.state, checkpoint.offset) for checkpoint in checkpoints)


@pytest.mark.parametrize("changed_at", [0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 5 * 4096 + 76])
def test_a_changed_file_resumed_from_an_earlier_ones_states(tmp_path, small_checkpoints, changed_at, monkeypatch):
    before = bytearray(os.urandom(5 * 4096 + 77))
    (tmp_path / "f").write_bytes(before)
    _, earlier = checkpointed_sha256(tmp_path / "f")
    after = bytes(before[:changed_at]) + b"changed" + bytes(before[changed_at + 3 :])
    (tmp_path / "f").write_bytes(after)
    starts = []
    made = digest._Sha256
    monkeypatch.setattr(digest, "_Sha256", lambda functions, state=None: starts.append(state) or made(functions, state))
    found, checkpoints = checkpointed_sha256(tmp_path / "f", earlier, changed_at)
    assert found == hashlib.sha256(after).hexdigest()
    # Started from the last state at or before the change, and the states after it are new.
    usable = [checkpoint for checkpoint in earlier if checkpoint.offset <= changed_at]
    assert starts == [usable[-1].state if usable else None]
    _, whole = checkpointed_sha256(tmp_path / "f")
    assert checkpoints == whole


def test_states_that_do_not_fit_are_not_used(tmp_path, small_checkpoints):
    data = os.urandom(4 * 4096)
    (tmp_path / "f").write_bytes(data)
    _, earlier = checkpointed_sha256(tmp_path / "f")
    expected = hashlib.sha256(data).hexdigest()
    damaged = [
        [replace(earlier[0], state=earlier[0].state[:-1])],  # too short
        [replace(earlier[0], offset=4000)],  # not where a checkpoint is
        [earlier[0], replace(earlier[1], state=earlier[0].state)],  # a state for another offset
        [earlier[1]],  # the first one missing
        [Checkpoint(4096, bytes(112))],  # zeros
    ]
    for checkpoints in damaged:
        assert checkpointed_sha256(tmp_path / "f", checkpoints, len(data))[0] == expected
    # A state beyond what the two files share is not used either: the bytes there differ.
    (tmp_path / "f").write_bytes(data[:5000] + b"x" + data[5001:])
    assert checkpointed_sha256(tmp_path / "f", earlier, 5000)[0] == hashlib.sha256(data[:5000] + b"x" + data[5001:]).hexdigest()


def test_without_openssl_the_file_is_hashed_whole(tmp_path, monkeypatch):
    data = os.urandom(10_000)
    (tmp_path / "f").write_bytes(data)
    _, earlier = checkpointed_sha256(tmp_path / "f")
    monkeypatch.setattr(digest, "_openssl", lambda: None)
    assert checkpointed_sha256(tmp_path / "f", earlier, 10_000) == (hashlib.sha256(data).hexdigest(), [])


def test_functions_that_hash_wrongly_fail_the_self_test():
    functions = digest._openssl()
    assert digest._self_test(functions)
    init, update, final = functions
    assert not digest._self_test((init, lambda context, data, length: update(context, data, max(0, length - 1)), final))
    assert not digest._self_test((lambda context: 0, update, final))


def _follow(path, written, *args):
    """checkpointed_sha256 following ``written`` in a thread; returns a function giving its result."""
    import threading

    result: dict = {}

    def run():
        try:
            result["value"] = checkpointed_sha256(path, *args, written=written)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()

    def joined():
        thread.join(timeout=30)
        assert not thread.is_alive(), "the hash did not end"
        if "error" in result:
            raise result["error"]
        return result["value"]

    return joined


@pytest.mark.parametrize("openssl", [True, False])
def test_a_hash_that_follows_the_writer_reads_only_what_it_is_told_is_final(tmp_path, small_checkpoints, monkeypatch, openssl):
    if not openssl:
        monkeypatch.setattr(digest, "_openssl", lambda: None)
    old = os.urandom(6 * 4096)
    new = old[:5000] + os.urandom(3 * 4096 + 11)  # shorter: the old file's tail is not the new one's
    (tmp_path / "f").write_bytes(old)
    _, earlier = checkpointed_sha256(tmp_path / "f")
    written = digest.Written()
    result = _follow(tmp_path / "f", written, earlier, 5000)
    with open(tmp_path / "f", "r+b") as handle:
        handle.seek(5000)
        written.advance(5000)
        for start in range(5000, len(new), 3000):
            # Garbage first where the writer is about to write: a hash that read ahead would see it.
            handle.write(b"\0" * 3000)
            handle.flush()
            handle.seek(start)
            handle.write(new[start : start + 3000])
            handle.flush()
            written.advance(min(start + 3000, len(new)))
        handle.truncate(len(new) + 100)  # longer than the file it says it wrote
        written.complete(len(new))
    found, checkpoints = result()
    assert found == hashlib.sha256(new).hexdigest()
    if openssl:
        assert checkpoints == checkpointed_sha256(tmp_path / "f")[1][: len(new) // 4096]


def test_a_hash_whose_writer_gives_up_stops(tmp_path, small_checkpoints):
    (tmp_path / "f").write_bytes(os.urandom(3 * 4096))
    written = digest.Written()
    result = _follow(tmp_path / "f", written)
    written.advance(4096)
    written.abandon()
    with pytest.raises(digest.Abandoned):
        result()


def test_a_hash_resumed_past_the_end_of_the_file_it_follows_fails(tmp_path, small_checkpoints):
    data = os.urandom(3 * 4096)
    (tmp_path / "f").write_bytes(data)
    _, earlier = checkpointed_sha256(tmp_path / "f")
    written = digest.Written()
    result = _follow(tmp_path / "f", written, earlier, 2 * 4096)
    written.complete(4096 + 10)  # said to share 8 KiB, but only 4 KiB and 10 bytes long
    with pytest.raises(OSError, match="shorter"):
        result()
