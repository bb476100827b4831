"""A deterministic generator of realistic errordb records, for the benchmarks.

Records look like the real ones: many repositories, exception classes and failure families;
messages built from a vocabulary, about 40% with value holes (``got {value}`` in the message,
``(.+)`` in the pattern); 37-line snippets with the raise on the 19th line, cut from generated
modules of ordinary code (a few raises per module, so windows overlap; docstrings, comments,
f-strings), whose lines repeat about as little as a real harvest's; slugs by the dataset's
convention. The same ``count`` and ``seed`` always give the same records.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from errordb.records.conventions import github_url, slug_base  # noqa: E402

CLASSES = ["ValueError", "TypeError", "RuntimeError", "KeyError", "NotImplementedError", "AssertionError",
           "IndexError", "AttributeError", "OSError", "torch.OutOfMemoryError", "pydantic_core.ValidationError"]  # fmt: skip
FAMILIES = ["missing-required-argument", "feature-parallelism-conflict", "shape-mismatch", "unsupported-dtype",
            "invalid-configuration", "resource-exhausted", "unknown-key", "version-mismatch"]  # fmt: skip
VERBS = ["requires", "expects", "cannot", "does not support", "failed to", "must", "refuses", "got", "needs"]
NOUNS = ["layer_ids", "tensor", "shape", "dtype", "config", "tokenizer", "kv cache", "attention backend",
         "pipeline stage", "expert", "quantization", "adapter", "scheduler", "batch", "sampler", "rank",
         "checkpoint", "device", "stream", "allocator", "model", "request", "sequence", "prefix", "lora"]  # fmt: skip
QUALIFIERS = ["explicit", "contiguous", "positive", "non-empty", "matching", "supported", "valid", "aligned"]
SHA = "0132848349585cfe6aae51c4941cbae872505f8a"
DATASET_VERSION = "2026-11-30T00:00:00.000Z"
#: Names what this generator makes, for the file names of cached output: a change here makes new files.
GENERATOR_KEY = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8]


def _message(rng: random.Random, serial: int) -> tuple[str, str]:
    """A message and its pattern; the serial number keeps most messages distinct, as in real data."""
    noun, other = rng.sample(NOUNS, 2)
    # The serial goes early so that it survives the slug's 50-character cut: slugs stay unique.
    words = [rng.choice(["DSPARK", "FlashInfer", "Triton", "NCCL", "MoE", "LoRA", "CUDA graph", "Scheduler"]),
             f"op{serial}", rng.choice(VERBS), rng.choice(QUALIFIERS), noun, "for", other]  # fmt: skip
    text = " ".join(words)
    if rng.random() < 0.4:
        message = f"{text}: got {{value}}"
        pattern = re.escape(f"{text}: got ") + r"(.+)"
    else:
        message = f"{text}."
        pattern = re.escape(message)
    return message, pattern


WORDS = sorted({w for n in NOUNS for w in n.split()} | {
    "batch", "block", "buffer", "cache", "chunk", "config", "context", "count", "data", "dim", "entry", "event",
    "extra", "factor", "group", "handle", "head", "hidden", "index", "input", "item", "key", "kind", "label",
    "layer", "length", "limit", "local", "mask", "meta", "mode", "name", "num", "offset", "output", "page",
    "path", "pool", "port", "queue", "range", "ratio", "result", "route", "scale", "seed", "size", "slot",
    "source", "spec", "start", "state", "step", "store", "target", "task", "token", "total", "type", "value",
    "weight", "width", "window", "worker"})  # fmt: skip
CALLS = ["get", "update", "append", "pop", "to", "view", "reshape", "split", "load", "copy_", "items", "format"]


def _name(rng: random.Random) -> str:
    return "_".join(rng.sample(WORDS, rng.choice((1, 2, 2, 3))))


def _statement(rng: random.Random, indent: str) -> list[str]:
    """One statement of ordinary library code, of the shapes real modules are made of."""
    a, b, c = _name(rng), _name(rng), _name(rng)
    shape = rng.randrange(12)
    if shape == 0:
        return [f"{indent}# {' '.join(rng.sample(WORDS, rng.randint(4, 10)))}"]
    if shape == 1:
        return [f"{indent}if {a} is not None and {b} > {rng.randint(0, 64)}:", f"{indent}    {c} = {a}.{rng.choice(CALLS)}({b})"]
    if shape == 2:
        return [f"{indent}for {a} in self.{b}:", f"{indent}    {c}[{a}] += {rng.randint(1, 8)}"]
    if shape == 3:
        return [f'{indent}logger.info(f"{" ".join(rng.sample(WORDS, 3))} {{{a}}} {rng.choice(WORDS)}={{self.{b}}}")']
    if shape == 4:
        return [f"{indent}return {a}, self.{b}"]
    if shape == 5:
        return [""]
    if shape == 6:
        return [f"{indent}{rng.choice(['return None', 'pass', 'continue', 'else:', 'try:', 'return result'])}"]
    return [f"{indent}{a} = self.{b}.{rng.choice(CALLS)}({c}, {rng.choice(WORDS)}={rng.choice(['None', 'True', str(rng.randint(0, 4096))])})"]


def _function(rng: random.Random, name: str) -> list[str]:
    """A method header, sometimes with a docstring (real windows often start or end inside one)."""
    lines = ["", f"    def {name}(self, {_name(rng)}, {_name(rng)}=None):"]
    if rng.random() < 0.2:
        lines += [f'        """{" ".join(rng.sample(WORDS, 6)).capitalize()}.', ""]
        lines += [f"        {' '.join(rng.sample(WORDS, rng.randint(6, 12)))}" for _ in range(rng.randint(1, 4))]
        lines += ['        """']
    return lines


def _source_file(rng: random.Random, raises: list[tuple[str, str, str]]) -> tuple[list[str], list[int]]:
    """A module's lines with one ``raise`` for each (function, class, message), and the 0-based
    line of each raise. Raises of one file sit near each other, so their windows overlap as
    the windows of a real harvest do."""
    lines = [f"class {_name(rng).title().replace('_', '')}:"]
    raise_lines = []
    for function, error_class, message in raises:
        lines += _function(rng, function)
        for _ in range(rng.randint(1, 4)):  # the def stays within the 18 lines before the raise
            lines += _statement(rng, "        ")
        lines += [f"        if {_name(rng)} is None:", f"            raise {error_class.rsplit('.', 1)[-1]}("]
        raise_lines.append(len(lines) - 1)
        lines += [f"                {json.dumps(message)}", "            )"]
        for _ in range(rng.randint(0, 6)):
            lines += _statement(rng, "        ")
    while len(lines) < raise_lines[-1] + 19:
        lines += _statement(rng, "        ")
    pad = max(0, 18 - raise_lines[0])
    imports = [f"from {_name(rng)}.{_name(rng)} import {_name(rng)}" for _ in range(pad)]
    return imports + lines, [line + pad for line in raise_lines]


def generate(count: int, seed: int = 7) -> Iterator[dict]:
    """``count`` record envelopes (as dicts), deterministic for a given seed."""
    rng = random.Random(seed)
    repos = [f"org{i % 97}/lib{i}" for i in range(max(1, count // 500 + 1))]
    serial = 0
    while serial < count:
        # A few raises per module, as a harvest finds them (sglang: 12,908 raises in 4,717 files).
        in_file = min(count - serial, rng.choice((1, 1, 2, 2, 3, 4, 6, 9, 14)))
        repo = rng.choice(repos)
        path = f"src/{repo.split('/')[1]}/{rng.choice(NOUNS).replace(' ', '_')}/module_{serial}.py"
        raises = []
        for _ in range(in_file):
            function = f"{rng.choice(['set', 'load', 'check', 'build', 'init'])}_{rng.choice(NOUNS).replace(' ', '_')}"
            raises.append((function, rng.choice(CLASSES), *_message(rng, serial + len(raises))))
        lines, raise_lines = _source_file(rng, [(f, c, m) for f, c, m, _ in raises])
        for (function, error_class, message, pattern), raise_line in zip(raises, raise_lines):
            yield _envelope(rng, seed, serial, repo, path, function, error_class, message, pattern, lines, raise_line)
            serial += 1


def _envelope(rng: random.Random, seed: int, serial: int, repo: str, path: str, function: str, error_class: str,
              message: str, pattern: str, lines: list[str], raise_line: int) -> dict:  # fmt: skip
    start = raise_line + 1 - 18
    record = {
        "id": hashlib.sha256(f"{seed}:{serial}".encode()).hexdigest()[:16], "repo": repo,
        "slug": slug_base(message), "errorCode": None, "errorMessage": message,
        "messagePattern": pattern, "errorType": "exception", "errorClass": error_class, "httpStatus": None,
        "severity": "error", "filePath": path, "lineNumber": raise_line + 1,
        "sourceCode": "\n".join(lines[raise_line - 18 : raise_line + 19]),
        "sourceCodeStart": start, "sourceCodeEnd": start + 36,
        "githubUrl": github_url(repo, SHA, path, start, start + 36),
        "documentation": f"The {message.split()[0]} path needs a {rng.choice(QUALIFIERS)} value here. " * 3,
        "triggerScenarios": f"Calling {function} with an unsupported value.",
        "commonSituations": "Upgrades that changed a default; scripts that skip validation.",
        "solutions": [f"Pass a {q} value." for q in rng.sample(QUALIFIERS, 3)],
        "exampleFix": f"# before\nmodel.{function}(None)\n\n# after\nmodel.{function}([0, 1])",
        "handlingStrategy": "validation", "validationCode": "assert value is not None",
        "typeGuard": None, "tryCatchPattern": None,
        "preventionTips": ["Validate inputs early.", "Pin versions."],
        "tags": sorted(rng.sample(["cuda", "moe", "lora", "dspark", "nccl", "triton", "config", "io"], 2)),
        "backgroundTag": rng.choice(FAMILIES), "analyzedSha": SHA, "analyzedAt": "2026-11-30T00:00:00.000Z",
        "schemaVersion": 2,
    }  # fmt: skip
    return {"record": record, "datasetVersion": DATASET_VERSION}


def sample_traceback(envelope: dict, value: str = "42") -> str:
    """A traceback as the record's library would print it, for the record's own message."""
    record = envelope["record"]
    message = record["errorMessage"].replace("{value}", value)
    return (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/main.py", line 10, in <module>\n    run()\n'
        f'  File "/venv/lib/python3.11/site-packages/{record["filePath"].split("/", 1)[1]}", '
        f"line {record['lineNumber']}, in {_enclosing_function(record['sourceCode'])}\n"
        f"    raise {record['errorClass'].rsplit('.', 1)[-1]}(\n"
        f"{record['errorClass']}: {message}\n"
    )


def _enclosing_function(snippet: str) -> str:
    header = next(line for line in reversed(snippet.splitlines()[:19]) if line.lstrip().startswith("def "))
    return header.split("def ", 1)[1].split("(", 1)[0]


def write_jsonl(count: int, path: Path, seed: int = 7) -> Path:
    """Write ``count`` generated records as JSON Lines (skipped when the file is already there)."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        for envelope in generate(count, seed):
            handle.write(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")) + "\n")
    partial.rename(path)
    return path


if __name__ == "__main__":
    out = write_jsonl(int(sys.argv[1]), Path(sys.argv[2]))
    print(out)
