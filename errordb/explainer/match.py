"""Matching parsed exceptions against record patterns, and ranking the matches.

The rules are in ``docs/matching.md`` (the site's explain box implements the same ones).
Candidates come from the store's ``matchKey`` index, so the cost of a lookup depends on how
many records share a word with the message, not on the size of the dataset; every candidate
is then verified with its real pattern, in RE2.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from errordb.explainer.parse.classify import BUILTIN_EXCEPTIONS, short_name
from errordb.records.patterns import PatternError, PatternSet, cached_pattern, cut_match, literal_weight, message_words, word_characters
from errordb.records.snippet import line_at

FULL_MATCH = 100
PARTIAL_MATCH = 40
CLASS_AGREES = 30
CLASS_DIFFERS = -30
FRAME_FILE = 20
FRAME_FUNCTION = 10
FRAME_LINE = 10
#: No frame in the record's file, but the innermost frame prints its raise statement (moved).
FRAME_SOURCE = 10
LINE_HORIZON = 200  # lines away at which a frame's line stops counting
#: A message reworded between versions, raised where the record's raise is (near_match).
NEAR_MATCH = 30
NEAR_SIMILARITY = 0.6
NEAR_WORDS = 200
#: Specific beats generic: a message match earns up to SPECIFIC_POINTS for the literal text its
#: pattern requires, in full from SPECIFIC_MAX letters and digits on; less than a frame's
#: function or line, so it only orders matches the traceback does not tell apart.
SPECIFIC_POINTS = 5
SPECIFIC_MAX = 100
#: A pattern with fewer word characters of literal text than this says too little on its own
#: ("No module named .+", "'.*' object has no attribute '.*'", "CUDA error: .*"): the
#: interpreter and every library print such messages, so its match needs another sign.
SPECIFIC_LITERAL = 24

#: White space across a line break: where a terminal or a page wrapped a long message.
_WRAPPED = re.compile(r"[ \t]*\n[ \t\n]*")

#: The record columns a match needs (and that renderers get along with it).
CANDIDATE_COLUMNS = (
    "id", "slug", "repo", "errorClass", "errorMessage", "messagePattern", "filePath", "function", "lineNumber", "distribution", "distributionVersion",
    "sourceCode", "sourceCodeStart",
)


@dataclass(frozen=True)
class Evidence:
    """One reason a match scores what it does."""

    kind: str  # message-full, -partial, -near, -specific; class-agrees, -differs; frame-file, -function, -line, -source
    points: float
    detail: str


@dataclass
class Match:
    """A record whose pattern matched one parsed exception, with its score and why."""

    record: dict[str, Any]
    score: float
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record["id"]


def short_class(name: str | None) -> str | None:
    return name.rsplit(".", 1)[-1] if name else None


#: The folder CPython installs its Lib/ as: python3.11, python3.13t (free-threaded), python3.
STDLIB_FOLDER = re.compile(r"python\d+(?:\.\d+)?t?")


def components(path: str) -> list[str]:
    """A path's non-empty components, ``\\`` read as ``/``."""
    return [p for p in path.replace("\\", "/").split("/") if p]


def common_tail(frame_path: str, record_path: str) -> int:
    """How many trailing path components two paths share (``\\`` counts as ``/``)."""
    return _shared_tail(components(frame_path), components(record_path))


def _shared_tail(a: list[str], b: list[str]) -> int:
    count = 0
    while count < min(len(a), len(b)) and a[-1 - count] == b[-1 - count]:
        count += 1
    return count


#: Path components of a frame looked up by :meth:`Matcher.in_file` (no record path is longer).
MAX_PATH_PARTS = 12

#: Folders that hold a repository's packages but are not installed with them.
SOURCE_ROOTS = frozenset(("python", "src", "lib", "source"))


def same_file(frame_path: str, record_path: str) -> bool:
    """Whether a traceback frame's file is the record's file.

    An installed package keeps the record's path but for the repository's source root
    (``python/``, ``src/``), under a prefix of its own (``site-packages/``): the frame's path
    must end with the record's whole path, or with all of it but such a root (keeping two
    components at least). Ending alike is not enough: vLLM's
    ``vllm/distributed/device_communicators/pynccl_wrapper.py`` shares its last three
    components with sglang's ``python/sglang/srt/distributed/device_communicators/...``.
    """
    parts, frame = components(record_path), components(frame_path)
    common = _shared_tail(frame, parts)
    # Never the file name alone: src/argparse.py keeps its root, or it would be any argparse.py.
    needed = len(parts) - 1 if len(parts) > 2 and parts[0] in SOURCE_ROOTS else len(parts)
    if common >= needed:
        return True
    # CPython's Lib/ is installed as lib/pythonX.Y/, so a top-level standard-library module
    # (Lib/argparse.py) shares only its file name with its installed copy: accept the version
    # folder in place of Lib.
    return (
        len(parts) >= 2 and parts[0] == "Lib" and common == len(parts) - 1
        and len(frame) > common and STDLIB_FOLDER.fullmatch(frame[-1 - common]) is not None
    )


def score_candidate(record: dict[str, Any], exc_type: str | None, message: str, frames: list[Any]) -> Match | None:
    """Score one record against one exception (``frames`` need ``file``, ``line``, ``function``).

    Returns ``None`` when the record's pattern does not match the message at all.
    """
    try:
        pattern = cached_pattern(record["messagePattern"])
    except PatternError:
        return None
    text = message.strip()
    first_line = text.split("\n", 1)[0]
    evidence: list[Evidence] = []
    held = None  # the pattern's literal text that a cut message holds
    if not record["messagePattern"] and text:
        return None  # a class raised without a message: found in no message (but everywhere inside one)
    if pattern.fullmatch(text) is not None:
        evidence.append(Evidence("message-full", FULL_MATCH, "the pattern matches the whole message"))
    elif first_line != text and pattern.fullmatch(first_line) is not None:
        evidence.append(Evidence("message-full", FULL_MATCH, "the pattern matches the message's first line"))
    elif (joined := _WRAPPED.sub(" ", text)) != text and pattern.fullmatch(joined) is not None:
        evidence.append(Evidence("message-full", FULL_MATCH, "the pattern matches the whole message, its lines joined (a terminal wrapped them)"))
    elif pattern.search(text) is not None:
        evidence.append(Evidence("message-partial", PARTIAL_MATCH, "the pattern matches part of the message"))
    elif (held := cut_match(record["messagePattern"], text)) is not None:
        evidence.append(Evidence("message-partial", PARTIAL_MATCH, "the message is cut short: it is the start of one the pattern matches"))
    else:
        return None
    weight = word_characters(held) if held is not None else literal_weight(record["messagePattern"])
    points = round(min(weight, SPECIFIC_MAX) * SPECIFIC_POINTS / SPECIFIC_MAX, 1)
    if points:
        evidence.append(Evidence("message-specific", points, f"the pattern requires {weight} letters and digits of the message"))
    if exc_type:
        if exc_type == record["errorClass"] or short_class(exc_type) == short_class(record["errorClass"]):
            evidence.append(Evidence("class-agrees", CLASS_AGREES, f"raised as {exc_type}, the record's class"))
        elif weight < SPECIFIC_LITERAL:
            return None  # a generic message under another class is another exception, frames or not
        elif raised_in_another_package(record, frames):
            return None  # another class, raised in another package: the words are quoted, or its own
        else:
            evidence.append(Evidence("class-differs", CLASS_DIFFERS, f"raised as {exc_type}; the record raises {record['errorClass']}"))
    best = _best_frame(record, frames)
    if best:
        evidence.extend(best)
    elif not _says_enough(record, evidence, weight, cut=held is not None):
        return None
    return Match(record=record, score=round(sum(e.points for e in evidence), 1), evidence=evidence)


def _says_enough(record: dict[str, Any], evidence: list[Evidence], weight: int, *, cut: bool) -> bool:
    """Whether a match with no frame in the record's file stands on its message and class.

    ``weight`` is the literal text the match rests on (the pattern's, or what a ``cut`` message
    holds of it). It does when the pattern is specific and the class does not contradict it (a
    message matched in full under another class was raised elsewhere; one matched inside a
    longer message is usually quoted by a wrapping exception, whose class is its own); a generic
    pattern stands only with an agreeing class of the project's own. A cut message stands only
    on the text it holds, specific enough, and a class that does not differ.
    """
    kinds = {e.kind for e in evidence}
    if cut:
        return "class-differs" not in kinds and weight >= SPECIFIC_LITERAL
    if "class-differs" in kinds and "message-full" in kinds:
        return False  # a partial match may be another exception quoting this one: its class differs
    if weight >= SPECIFIC_LITERAL:
        return True
    return "class-agrees" in kinds and _own_class(record)


def _own_class(record: dict[str, Any]) -> bool:
    """Whether the record raises a class of its own project: not a builtin, and not one named
    after another package (sglang raising ``torch.OutOfMemoryError`` says nothing torch does not)."""
    if short_name(record["errorClass"]) in BUILTIN_EXCEPTIONS:
        return False
    name = record["errorClass"].split("(", 1)[0]
    package = name.split(".", 1)[0] if "." in name else None
    return package is None or package in components(record["filePath"])


#: Where installers put packages: the folder after it is a package's top-level name.
INSTALL_FOLDERS = ("site-packages", "dist-packages")


def moved_file(frame_path: str, record_path: str) -> bool:
    """Whether a frame's file may be the record's file moved to another folder of its package
    between the pasted version and the record's (``pydantic/fields.py`` became
    ``pydantic/v1/fields.py``): the same file name, in the record's top-level package.

    The record's package is the first folder of its path after a source root; the frame's is
    the folder after ``site-packages/`` or ``dist-packages/`` when it has one (an installed
    package), else any folder of its path (a checkout).
    """
    parts, frame = package_path(record_path), components(frame_path)
    if len(parts) < 2 or not frame or frame[-1] != parts[-1]:
        return False
    return in_package(frame_path, parts[0])


def in_package(frame_path: str, package: str) -> bool:
    """Whether a frame's file is in top-level ``package``: the folder after ``site-packages/`` or
    ``dist-packages/`` when it has one (an installed package), else any folder of its path (a
    checkout)."""
    installed = installed_package(frame_path)
    if installed is not None:
        return installed == package
    return package in components(frame_path)[:-1]


def package_path(record_path: str) -> list[str]:
    """A record's path from its top-level package on (its repository's source root left off)."""
    parts = components(record_path)
    return parts[1:] if len(parts) > 2 and parts[0] in SOURCE_ROOTS else parts


def installed_package(frame_path: str) -> str | None:
    """The top-level package a frame's file is installed in: the folder after its last
    ``site-packages/`` or ``dist-packages/`` ("" for a module right in it; None: not an
    installed package's file)."""
    folders = components(frame_path)[:-1]
    for marker in INSTALL_FOLDERS:
        if marker in folders:
            after = len(folders) - folders[::-1].index(marker)
            return folders[after] if after < len(folders) else ""
    return None


def raised_in_another_package(record: dict[str, Any], frames: list[Any]) -> bool:
    """Whether the innermost frame, where the exception was raised, is in an installed package
    other than the record's. Under another class than the record's, its message holds the
    record's words only as a quote (an HTTP client's error quoting a server's body, pydantic's
    quoting a validator's): it was not raised where the record is."""
    package = installed_package(frames[-1].file or "") if frames else None
    return bool(package) and package != package_path(record["filePath"])[0]


def _best_frame(record: dict[str, Any], frames: list[Any]) -> list[Evidence] | None:
    best: tuple[float, list[Evidence]] | None = None
    function = (record.get("function") or "").rsplit(".", 1)[-1]
    if frames and function and frames[-1].function and frames[-1].function != function and same_file(frames[-1].file or "", record["filePath"]):
        return None  # the innermost frame, where it was raised, is another function of the record's file
    for frame in frames:  # outermost first: a later (inner) frame wins a tie
        if not same_file(frame.file or "", record["filePath"]):
            if function and frame.function == function and moved_file(frame.file or "", record["filePath"]):
                found = [Evidence("frame-function", FRAME_FUNCTION, f"in {frame.function}, the function that raises it (its file has moved)")]
                if best is None or FRAME_FUNCTION >= best[0]:
                    best = (FRAME_FUNCTION, found)
            continue
        found = [Evidence("frame-file", FRAME_FILE, f"a frame is in {record['filePath']}")]
        # A traceback prints a function's own name; the record may know its qualified name.
        if function and frame.function == function:
            found.append(Evidence("frame-function", FRAME_FUNCTION, f"in {frame.function}, the function that raises it"))
        if frame.line is not None:
            distance = abs(frame.line - record["lineNumber"])
            if distance == 0:
                found.append(Evidence("frame-line", FRAME_LINE, f"at line {frame.line}, the record's line"))
            else:
                points = round(FRAME_LINE * max(0.0, 1 - distance / LINE_HORIZON), 1)
                if points > 0:
                    found.append(Evidence("frame-line", points, f"at line {frame.line}, {distance} lines from the record's {record['lineNumber']}"))
        total = sum(e.points for e in found)
        if best is None or total >= best[0]:
            best = (total, found)
    if best is None and frames and _prints_the_raise(record, frames[-1]):
        return [Evidence("frame-source", FRAME_SOURCE, f"{frames[-1].file} prints the statement that raises it: moved from {record['filePath']}")]
    return best[1] if best else None


#: What begins a raise statement whatever it raises: its keyword and the class it names.
_STATEMENT_HEAD = re.compile(r"^(?:raise\s+[\w.]+|assert\b)")


def _prints_the_raise(record: dict[str, Any], frame: Any) -> bool:
    """Whether the innermost frame, in the record's package, prints the record's raise
    statement, and that statement says more than its keyword and class (24 letters and digits:
    ``raise NotImplementedError(``, the first line of many raises, does not): the raise moved
    to another file or function between the pasted version and the record's, and kept its line
    (the "context line" Sentry groups by across releases)."""
    source = (frame.source or "").strip()
    if word_characters(_STATEMENT_HEAD.sub("", source, count=1)) < SPECIFIC_LITERAL or not frame.file:
        return False
    line = line_at(record.get("sourceCode") or "", record.get("sourceCodeStart") or 0, record["lineNumber"])
    return line is not None and line.strip() == source and in_package(frame.file, package_path(record["filePath"])[0])


_WORD = re.compile(r"\w+", re.ASCII)
#: A record message's words, its placeholders (``{n}``, the value a message holds) as one each.
_TEMPLATE_WORD = re.compile(r"\{[^{}]*\}|\w+", re.ASCII)
_ANY = "\0"  # a placeholder, which any one word of the other message is


def reworded(old: str, new: str) -> tuple[float, str, str]:
    """How alike a record's message ``old`` and a pasted ``new`` read, word for word, and the
    first thing that differs.

    Returns (similarity, the words of ``old`` replaced, the words of ``new`` in their place):
    the similarity is twice the longest common subsequence of their words (compared
    lower-cased, at most :data:`NEAR_WORDS` of each; a placeholder of ``old`` is any one word)
    over the number of words of both.
    """
    a, b = _TEMPLATE_WORD.findall(old)[:NEAR_WORDS], _WORD.findall(new)[:NEAR_WORDS]
    if not a or not b:
        return 0.0, "", ""
    la, lb = [_ANY if w[0] == "{" else w.lower() for w in a], [w.lower() for w in b]
    # common[i][j]: the longest common subsequence of la[i:] and lb[j:]
    common = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            same = la[i] == lb[j] or la[i] == _ANY
            common[i][j] = common[i + 1][j + 1] + 1 if same else max(common[i + 1][j], common[i][j + 1])
    removed: list[str] = []
    added: list[str] = []
    i = j = 0
    while i < len(a) or j < len(b):  # the first run of differences, from the start
        if i < len(a) and j < len(b) and (la[i] == lb[j] or la[i] == _ANY):
            if removed or added:
                break
            i, j = i + 1, j + 1
        elif j == len(b) or (i < len(a) and common[i + 1][j] >= common[i][j + 1]):
            removed.append(a[i])
            i += 1
        else:
            added.append(b[j])
            j += 1
    return 2 * common[0][0] / (len(a) + len(b)), " ".join(removed), " ".join(added)


def near_match(record: dict[str, Any], exc_type: str | None, message: str, frames: list[Any]) -> Match | None:
    """A record whose pattern does not match, but that the traceback places at the raise: the
    innermost frame is in its file and function, the class printed is its class, and the
    message reads nearly as its own (reworded between versions; :func:`reworded`)."""
    if not frames or not exc_type or not record.get("function"):
        return None
    innermost = frames[-1]
    if innermost.function != record["function"].rsplit(".", 1)[-1] or not same_file(innermost.file or "", record["filePath"]):
        return None
    if exc_type != record["errorClass"] and short_class(exc_type) != short_class(record["errorClass"]):
        return None
    similarity, old, new = reworded(record["errorMessage"], message)
    if similarity < NEAR_SIMILARITY:
        return None
    if old and new:
        change = f": the record's \u201c{old}\u201d reads \u201c{new}\u201d here"
    elif old or new:
        change = f": the record's \u201c{old}\u201d is not here" if old else f": \u201c{new}\u201d is added here"
    else:
        change = ""
    evidence = [
        Evidence("message-near", NEAR_MATCH, f"reworded, {int(similarity * 100 + 0.5)}% of the words alike{change}"),
        Evidence("class-agrees", CLASS_AGREES, f"raised as {exc_type}, the record's class"),
        *(_best_frame(record, frames) or []),
    ]
    return Match(record=record, score=round(sum(e.points for e in evidence), 1), evidence=evidence)


def _at_the_raise(match: Match) -> bool:
    """Whether a match has a frame in its record's file and function."""
    kinds = {e.kind for e in match.evidence}
    return "frame-file" in kinds and "frame-function" in kinds


def rank(matches: list[Match]) -> list[Match]:
    """Best first; equal scores by record id so the order is deterministic."""
    return sorted(matches, key=lambda m: (-m.score, m.id))


def _raise_site(record: dict[str, Any]) -> tuple[str, ...]:
    """What names a raise site across a repository and its installed copy: the path from the
    top-level package on, the function and the class."""
    return (*package_path(record["filePath"]), record.get("function") or "", short_class(record["errorClass"]) or "")


def without_shadowed_drafts(matches: list[Match]) -> list[Match]:
    """The matches without the learned drafts of a raise site a documented record matched too:
    the documented record says all the draft does, and more."""
    documented = {_raise_site(m.record) for m in matches if not m.record.get("distribution")}
    return [m for m in matches if not m.record.get("distribution") or _raise_site(m.record) not in documented]


class Matcher:
    """Looks candidates up in a store and scores them; one per database connection."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._unindexed: tuple[list[str], PatternSet] | None = None

    def candidates(self, message: str) -> list[dict[str, Any]]:
        """Records whose index word occurs in ``message``, and those with no index word whose
        pattern is found in it (all of those searched at once, :class:`PatternSet`)."""
        found: dict[str, dict[str, Any]] = {}
        words = message_words(message)
        # SQLite allows 32766 parameters; batches keep any message far below that.
        for start in range(0, len(words), 500):
            self._add_rows(found, "matchKey", words[start : start + 500])
        ids = self._unindexed_found(message)
        for start in range(0, len(ids), 500):
            self._add_rows(found, "id", ids[start : start + 500])
        return list(found.values())

    def _add_rows(self, found: dict[str, dict[str, Any]], column: str, values: list[str]) -> None:
        columns = ", ".join(f'"{c}"' for c in CANDIDATE_COLUMNS)
        sql = f"SELECT {columns} FROM records WHERE {column} IN ({','.join('?' * len(values))})"
        for row in self.conn.execute(sql, values):
            found[row[0]] = dict(zip(CANDIDATE_COLUMNS, row))

    def _unindexed_found(self, message: str) -> list[str]:
        if self._unindexed is None:
            sql = "SELECT id, messagePattern FROM records WHERE matchKey = '' AND messagePattern != '' ORDER BY id"
            rows = self.conn.execute(sql).fetchall()
            self._unindexed = ([row[0] for row in rows], PatternSet([row[1] for row in rows]))
        ids, patterns = self._unindexed
        return [ids[position] for position in patterns.search(message)] if ids else []

    def in_file(self, path: str) -> list[dict[str, Any]]:
        """The records of the file a frame's ``path`` is (:func:`same_file`), by an index seek
        on each path the record could have: every tail of ``path``, bare or under a source root."""
        parts = components(path)[-MAX_PATH_PARTS:]
        tails = ["/".join(parts[-k:]) for k in range(1, len(parts) + 1)]
        if not tails:
            return []
        found: dict[str, dict[str, Any]] = {}
        roots = [*sorted(SOURCE_ROOTS), "Lib"]  # CPython's Lib/ is installed as lib/pythonX.Y/
        self._add_rows(found, "filePath", tails + [f"{root}/{tail}" for root in roots for tail in tails])
        return [record for record in found.values() if same_file(path, record["filePath"])]

    def match(self, exc_type: str | None, message: str, frames: list[Any] = ()) -> list[Match]:
        """Every record matching one exception, ranked: by its pattern, or nearly
        (:func:`near_match`) when the innermost frame is where the record raises and no
        record's pattern matched there. An exception without a message is looked up by its
        innermost frame's file (records of classes raised without one)."""
        frames = list(frames)
        matches = {}
        candidates = self.candidates(message)
        if not message.strip() and frames and frames[-1].file:
            # An exception without a message: the records of classes raised without one, where it was raised.
            candidates += [record for record in self.in_file(frames[-1].file) if not record["messagePattern"]]
        for record in candidates:
            scored = score_candidate(record, exc_type, message, frames)
            if scored:
                matches[scored.id] = scored
        if frames and exc_type and frames[-1].file and not any(_at_the_raise(m) for m in matches.values()):
            for record in self.in_file(frames[-1].file):
                if record["id"] not in matches and (near := near_match(record, exc_type, message, frames)):
                    matches[near.id] = near
        return rank(without_shadowed_drafts(list(matches.values())))
