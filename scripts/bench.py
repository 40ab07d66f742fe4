"""The benchmark runner: each area's benchmarks live in scripts/bench_<area>.py as BENCHMARKS = [functions].

Every figure is printed beside a baseline measured in the same run on the same machine (these machines are
noisy, so absolute numbers alone mean little): the ratio is what a target is checked against.
"""

import argparse
import importlib
import json
import platform
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import BenchContext, Row, choose_workdir, format_table

AREAS = ["transport", "bash", "input", "flood", "progress", "tasks", "scale", "todos", "subagent", "subagent_tasks",
         "sessions", "start"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and smaller scales")
    parser.add_argument("--only", action="append", choices=AREAS, help="run only these areas (repeatable)")
    parser.add_argument("--bench", action="append", metavar="NAME",
                        help="run only the benchmarks whose function name contains NAME (repeatable), e.g. round_trip")
    parser.add_argument("--flood-seconds", type=float, metavar="S",
                        help="how long bench_flood's task writes at full speed [default: 20; --quick: 4]")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON")
    args = parser.parse_args()
    rows: list[Row] = []
    started = time.monotonic()
    workdir, tried = choose_workdir()
    print("state directory: " + str(workdir) + "  (one file creation: " +
          ", ".join(f"{parent} {cost * 1e6:.0f} us" for parent, cost in tried) + "; see choose_workdir)",
          file=sys.stderr, flush=True)
    try:
        ctx = BenchContext(quick=args.quick, workdir=workdir, flood_seconds=args.flood_seconds)
        for area in args.only or AREAS:
            try:
                module = importlib.import_module(f"bench_{area}")
            except ImportError as exc:  # a bench that cannot load is a failure to see, not an area to skip
                print(f"[{area}] cannot load: {exc}", file=sys.stderr)
                rows.append(Row(area, f"bench_{area}", "error", note=f"cannot load: {exc}", ok=False))
                continue
            for bench in module.BENCHMARKS:
                if args.bench and not any(part in bench.__name__ for part in args.bench):
                    continue
                print(f"[{area}] {bench.__name__} ...", file=sys.stderr, flush=True)
                try:
                    new_rows = bench(ctx)
                except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
                    new_rows = [Row(area, bench.__name__, "error", note=f"{type(exc).__name__}: {exc}")]
                for row in new_rows:
                    row.area = area
                    print("    " + row.one_line(), file=sys.stderr, flush=True)
                rows.extend(new_rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_table(rows))
    print(f"\n{len(rows)} figures in {time.monotonic() - started:.0f} s on {platform.node()} "
          f"({platform.processor() or platform.machine()}, Python {platform.python_version()})")
    if args.json:
        Path(args.json).write_text(json.dumps([r.as_dict() for r in rows], indent=2))
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
