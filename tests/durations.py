"""The suite's time per test file, from pytest's own report: ``tests/durations.txt``.

    python -m pytest --durations=0 -q 2>&1 | tee /tmp/pytest.log | python tests/durations.py --label "after, at <commit>"

Reads pytest's output on stdin (``--durations=0`` lists every phase of every test), sums setup, call and teardown per
file, and prepends a block to ``tests/durations.txt`` (newest first; earlier blocks are kept, so a change shows its
before and after): the wall time from pytest's closing line, the worker seconds in all, the CPU (``lscpu``) and one
line per file, slowest first. With pytest-xdist the wall time is about the worker seconds divided by the workers.
"""

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

RECORD = Path(__file__).with_name("durations.txt")
PHASE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(tests/[\w/]+\.py)::")
CLOSING = re.compile(r"(\d+ (?:passed|failed).*?) in ([\d.]+)s")


def cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs"


def summarize(lines: list[str], label: str) -> str:
    per_file: Counter = Counter()
    tests: Counter = Counter()
    closing = None
    for line in lines:
        if (match := PHASE.match(line)):
            per_file[match.group(3)] += float(match.group(1))
            tests[match.group(3)] += match.group(2) == "call"
        elif (match := CLOSING.search(line)):
            closing = (match.group(1), float(match.group(2)))
    if not per_file or closing is None:
        raise SystemExit("durations.py: no `--durations=0` report and closing line on stdin")
    total = sum(per_file.values())
    wall = closing[1]
    out = [f"## {label}", f"wall {int(wall // 60)} min {int(wall % 60):02d} s ({closing[0]}); "
           f"{total:.0f} worker-seconds; {cpu()}", "seconds  tests  file"]
    out += [f"{seconds:7.1f}  {tests[name]:5d}  {name}" for name, seconds in per_file.most_common()]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="what was measured, e.g. 'after, at abc1234, idle machine'")
    args = parser.parse_args()
    block = summarize(sys.stdin.read().splitlines(), args.label)
    earlier = RECORD.read_text() if RECORD.exists() else ""
    RECORD.write_text(block + ("\n" + earlier if earlier else ""))
    print(block, end="")


if __name__ == "__main__":
    main()
