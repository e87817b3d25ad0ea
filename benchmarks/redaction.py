"""Redaction speed: adversarial and ordinary text at 10 KB and 100 KB, beside the plain read of the same bytes.

Inputs (generated, a fixed seed; nothing is read from outside the repository):

* ``adversarial``: each rule's prefix or keyword repeated to the size (``pwd``, ``token``, ``sk-``, ``eyJ``,
  ``AKIA``, ``ghp_``, ``password=``, ``://a:``, ``-----BEGIN RSA PRIVATE KEY-----``, …: what made the old
  patterns quadratic), and long runs of key-like characters (one letter; random base64, alphanumerics and
  hex). Each input is redacted once to warm RE2's lazily built automaton, then timed ``--repeats`` times;
  its figure is the median, and ``adversarial_ms_100k`` is the worst input's at 100 KB (target <= 20 ms).
* ``ordinary``: transcript-like text — prose, code blocks, shell commands and their output, paths, UUIDs,
  dates, commit hashes, JSON — holding no secret; ``ordinary_mb_per_s`` is its redaction throughput
  (median over the repeats, at 100 KB), warmed the same way.
* ``read floor``: the plain read of the same ordinary text as an importer reads it — the text as transcript
  lines (one JSON object per ~400-character message) read from a file, split into lines and decoded, without
  redaction — timed the same way: ``read_floor_mb_per_s`` (per byte of text). Target: ordinary >= 0.25 x
  floor. ``raw_read_mb_per_s`` is the bytes read and decoded as UTF-8 alone (no JSON), for scale.
* ``dense secrets`` (reported, no target): 100 KB of real-looking distinct keys, every one a secret.

Last line: one JSON object (``adversarial_ms_100k``, ``ordinary_mb_per_s``, ``read_floor_mb_per_s``,
``ordinary_over_floor``, ``raw_read_mb_per_s``, ``adversarial_ms_10k``, ``worst_input_100k``,
``dense_secrets_ms_100k``).

Usage: python benchmarks/redaction.py [--repeats 15] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scriptorium.redaction import Redactor

PREFIXES = [
    "pwd",
    "token",
    "secret",
    "api_key",
    "password=",
    "token=x ",
    "key: ",
    "sk-",
    "sk-ant-api03-",
    "eyJ",
    "AKIA",
    "ghp_",
    "glpat-",
    "xoxb-",
    "AIza",
    "://a:",
    "https://",
    "//x/:_authToken=",
    "-----BEGIN RSA PRIVATE KEY-----",
    "aws ",
    "AccountKey=",
]
SIZES = (10_000, 100_000)
PROSE = (
    "the build fails because the test fixture reads the config before the migration runs so we move "
    "the call into setup and pin the version then rerun the suite and it passes on main after rebase"
)


def adversarial(size: int, rng: random.Random) -> dict[str, str]:
    inputs = {repr(p): (p * (size // len(p) + 1))[:size] for p in PREFIXES}
    inputs["run of A"] = "A" * size
    for name, alphabet in (
        ("random base64", string.ascii_letters + string.digits + "+/"),
        ("random alnum", string.ascii_letters + string.digits),
        ("random hex", string.hexdigits.lower()[:16]),
    ):
        inputs[name] = "".join(rng.choice(alphabet) for _ in range(size))
    return inputs


def ordinary(size: int, rng: random.Random) -> str:
    words = PROSE.split()
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        kind = rng.randrange(5)
        if kind == 0:
            parts.append(" ".join(rng.choice(words) for _ in range(rng.randrange(8, 40))).capitalize() + ".\n")
        elif kind == 1:
            name = rng.choice(words)
            parts.append(f"```python\ndef {name}(path: str) -> int:\n    return len(open(path).read())\n```\n")
        elif kind == 2:
            sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
            parts.append(f"$ git log --oneline -1\n{sha[:7]} fix {rng.choice(words)}\ncommit {sha}\n")
        elif kind == 3:
            uuid = "-".join("".join(rng.choice("0123456789abcdef") for _ in range(n)) for n in (8, 4, 4, 4, 12))
            parts.append(f'{{"sessionId": "{uuid}", "timestamp": "2026-11-20T09:00:01.000Z", "cwd": "/srv/app"}}\n')
        else:
            parts.append(f"src/{rng.choice(words)}/{rng.choice(words)}.py:{rng.randrange(1, 400)}: error E501\n")
    return "".join(parts)[:size]


def dense_secrets(size: int, rng: random.Random) -> str:
    keys = []
    while sum(map(len, keys)) < size:
        keys.append("AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)) + " ")
    return "".join(keys)[:size]


def transcript_line(message: str) -> dict[str, object]:
    """One message as a Claude Code transcript line holds it."""
    return {
        "type": "user",
        "uuid": "9fceb02d-0ae5-48e9-8dc9-70b74767f193",
        "timestamp": "2026-11-20T09:00:01.000Z",
        "message": {"role": "user", "content": message},
    }


def median_ms(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up, alike for every side
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="3 repeats: that it runs, not its figures")
    args = parser.parse_args()
    repeats = 3 if args.smoke else args.repeats
    rng = random.Random(20261206)
    redactor = Redactor(b"k" * 32)
    figures: dict[str, object] = {}
    print(f"{'input':42} {'size':>8} {'median ms':>10}")
    for size in SIZES:
        worst, worst_name = 0.0, ""
        for name, text in adversarial(size, rng).items():
            ms = median_ms(lambda text=text: redactor.text(text), repeats)  # type: ignore[misc]
            print(f"{name:42} {size:>8} {ms:>10.2f}")
            if ms > worst:
                worst, worst_name = ms, name
        figures[f"adversarial_ms_{size // 1000}k"] = round(worst, 3)
        if size == SIZES[-1]:
            figures["worst_input_100k"] = worst_name
    text = ordinary(SIZES[-1], rng)
    assert redactor.text(text) == text, "the ordinary text holds no secret"
    megabytes = len(text.encode()) / 1e6
    ordinary_ms = median_ms(lambda: redactor.text(text), repeats)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ordinary.txt"
        path.write_text(text)
        raw_ms = median_ms(lambda: path.read_bytes().decode("utf-8"), repeats)
        lines = Path(scratch) / "ordinary.jsonl"
        lines.write_text(
            "".join(json.dumps(transcript_line(text[i : i + 400])) + "\n" for i in range(0, len(text), 400))
        )
        floor_ms = median_ms(lambda: [json.loads(line) for line in lines.read_bytes().splitlines()], repeats)
    dense = dense_secrets(SIZES[-1], rng)
    dense_ms = median_ms(lambda: redactor.text(dense), repeats)
    print(f"{'ordinary (redaction)':42} {SIZES[-1]:>8} {ordinary_ms:>10.2f}")
    print(f"{'ordinary (read floor: as transcript lines)':42} {SIZES[-1]:>8} {floor_ms:>10.2f}")
    print(f"{'ordinary (raw read + UTF-8 decode)':42} {SIZES[-1]:>8} {raw_ms:>10.2f}")
    print(f"{'dense secrets (every word a key)':42} {SIZES[-1]:>8} {dense_ms:>10.2f}")
    figures["ordinary_mb_per_s"] = round(megabytes / (ordinary_ms / 1000), 2)
    figures["read_floor_mb_per_s"] = round(megabytes / (floor_ms / 1000), 2)
    figures["ordinary_over_floor"] = round(floor_ms / ordinary_ms, 3)
    figures["raw_read_mb_per_s"] = round(megabytes / (raw_ms / 1000), 2)
    figures["dense_secrets_ms_100k"] = round(dense_ms, 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
