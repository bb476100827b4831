"""A deterministic generator of realistic errordb records, for the benchmarks.

Records look like the real ones: many repositories, exception classes and failure families;
messages built from a vocabulary, about 40% with value holes (``got {value}`` in the message,
``(.+)`` in the pattern); 37-line snippets with the raise on the 19th line; slugs by the
dataset's convention. The same ``count`` and ``seed`` always give the same records.
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


def _snippet(rng: random.Random, function: str, error_class: str, message: str) -> list[str]:
    """37 lines, like the seeds: 18 lines of context, the ``raise`` on the 19th, 18 after it."""
    body = [f"        value_{i} = self.{rng.choice(NOUNS).replace(' ', '_')}_{i}  # step {i}" for i in range(30)]
    before = ["    def helper(self):", "        return self.model", "", f"    def {function}(self, value):"]
    before += body[: 17 - len(before)] + ["        if value is None:"]
    raise_lines = [f"            raise {error_class.rsplit('.', 1)[-1]}(", f"                {json.dumps(message)}", "            )"]
    lines = before + raise_lines + body[12:28]
    assert len(lines) == 37 and lines[18].lstrip().startswith("raise")
    return lines


def generate(count: int, seed: int = 7) -> Iterator[dict]:
    """``count`` record envelopes (as dicts), deterministic for a given seed."""
    rng = random.Random(seed)
    repos = [f"org{i % 97}/lib{i}" for i in range(max(1, count // 500 + 1))]
    for serial in range(count):
        record_id = hashlib.sha256(f"{seed}:{serial}".encode()).hexdigest()[:16]
        repo = rng.choice(repos)
        error_class = rng.choice(CLASSES)
        message, pattern = _message(rng, serial)
        function = f"{rng.choice(['set', 'load', 'check', 'build', 'init'])}_{rng.choice(NOUNS).replace(' ', '_')}"
        path = f"src/{repo.split('/')[1]}/{rng.choice(NOUNS).replace(' ', '_')}/module_{serial % 211}.py"
        start = rng.randint(1, 5000)
        line = start + 18
        slug = slug_base(message)
        record = {
            "id": record_id, "repo": repo, "slug": slug, "errorCode": None, "errorMessage": message,
            "messagePattern": pattern, "errorType": "exception", "errorClass": error_class, "httpStatus": None,
            "severity": "error", "filePath": path, "lineNumber": line,
            "sourceCode": "\n".join(_snippet(rng, function, error_class, message)),
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
        yield {"record": record, "datasetVersion": DATASET_VERSION}


def sample_traceback(envelope: dict, value: str = "42") -> str:
    """A traceback as the record's library would print it, for the record's own message."""
    record = envelope["record"]
    message = record["errorMessage"].replace("{value}", value)
    return (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/main.py", line 10, in <module>\n    run()\n'
        f'  File "/venv/lib/python3.11/site-packages/{record["filePath"].split("/", 1)[1]}", '
        f"line {record['lineNumber']}, in {record['sourceCode'].splitlines()[3].split('def ')[1].split('(')[0]}\n"
        f"    raise {record['errorClass'].rsplit('.', 1)[-1]}(\n"
        f"{record['errorClass']}: {message}\n"
    )


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
