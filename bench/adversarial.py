"""Hostile input costs time linear in its size: each input read at a size and at 4 times it.

    python bench/adversarial.py            # the table
    python bench/adversarial.py --check    # and exit 1 when an input grows worse than linearly

Each input is one that a careless parser or regex engine takes quadratic or exponential time
on: long lines built to make regexes backtrack, a 10 MB line, thousands of exceptions in one
log or one chain, exception groups nested deep, and a record pattern that backtracks
exponentially in Python's ``re`` (``(a+)+$``, matched in RE2). Each is parsed (or matched) at
size n and 4n (a line at most 60,000 characters: the parser cuts longer ones at 64 KiB), best
of ``--repeats``, and the ratio of the two times printed: about 4 when the
cost is linear, 16 when it is quadratic. The unit tests check what these inputs give; this
checks how long they take, as a ratio within one run, never as a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from errordb.explainer.parse import parse_text  # noqa: E402
from errordb.records.patterns import cached_pattern  # noqa: E402

#: Lines built against the parser's regexes: (the repeated unit, the text around it).
ADVERSARIAL_LINES = [
    ('", line 1', 'File "{}'),
    ("a.", "{}!"),
    ("[", "{}"),
    ("(", "{}pid=1"),
    ("1:", "{}"),
    ("_ ", "{}"),
    ("x:1 in ", "\u2502{}"),
    ("\x1b[", "{}"),
    ("\x1b]", "{}"),
    (" ", "E{}x"),
    ("x", "{}: y"),
    (" -", "2026-08-28 05:10:05{}"),
    (" ", "svc{}|"),
    ("-", "+{}"),
    ("  | ", "{}ValueError: x (2 sub-exceptions)"),
]
PLAIN = 'Traceback (most recent call last):\n  File "/app/x.py", line 3, in <module>\n    f()\nValueError: bad\n'


def adversarial_line(unit: str, around: str, repeats: int) -> str:
    return around.format(unit * repeats)


def _inputs() -> dict[str, Callable[[int], Callable[[], object]]]:
    """Input name -> (scale -> the work to time at that scale)."""
    inputs: dict[str, Callable[[int], Callable[[], object]]] = {}
    for unit, around in ADVERSARIAL_LINES:
        def lines(scale: int, unit=unit, around=around):
            line = adversarial_line(unit, around, 15_000 * scale // len(unit) + 1)
            text = "\n".join([line, PLAIN, line, line] * 30)  # thirty times over: long enough to time on a busy machine
            return lambda: parse_text(text)
        inputs[f"line {around.format(unit * 3)[:14]!r}"] = lines
    inputs["one huge line"] = lambda scale: (lambda text=("ValueError: " + "x" * 2_500_000 * scale): parse_text(text))
    inputs["exceptions in one log"] = lambda scale: (
        lambda text="".join(PLAIN.replace("3", str(i)) for i in range(2_500 * scale)): parse_text(text))
    chain = ('Traceback (most recent call last):\n  File "c.py", line {i}, in f\n    raise E()\nValueError: step {i}\n'
             "\nDuring handling of the above exception, another exception occurred:\n\n")
    inputs["a chain of exceptions"] = lambda scale: (
        lambda text="".join(chain.format(i=i) for i in range(250 * scale)): parse_text(text))
    pattern = cached_pattern("(a+)+$")
    inputs["(a+)+$ in RE2"] = lambda scale: (lambda text="!" + "a" * 1_000_000 * scale: pattern.search(text))
    return inputs


def best_of(work: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when a ratio is above --limit")
    parser.add_argument("--limit", type=float, default=12.0,
                        help="the highest ratio accepted by --check (linear: 4, quadratic: 16)")
    args = parser.parse_args(argv)
    print(f"{'input':34} {'n':>10} {'4n':>10} {'4n / n':>7}")
    worst = 0.0
    for name, at in _inputs().items():
        small, large = best_of(at(1), args.repeats), best_of(at(4), args.repeats)
        ratio = large / max(small, 1e-6)
        worst = max(worst, ratio)
        print(f"{name:34} {small * 1000:8.1f}ms {large * 1000:8.1f}ms {ratio:7.1f}")
    print(f"worst ratio {worst:.1f} (linear: 4, quadratic: 16)")
    if args.check and worst > args.limit:
        print(f"adversarial: a ratio above {args.limit:g}: cost grows faster than the input", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
