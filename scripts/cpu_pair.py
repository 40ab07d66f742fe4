"""The bash daemon's CPU a task in this checkout against another (`--tree DIR`), measured so that the
machine's drift cancels out: both daemons run at once (state in /dev/shm), and every client thread calls
`run("true", wait_seconds=0)` on one and then on the other, half the clients in the other order. A round runs
twice, the daemons started in either order; the ratio this/other of their CPU a task (user + system, from
/proc) is printed for each run, and their geometric mean at the end.

Separate runs of one tree move about 10% on this VM, so a change of a few percent shows only here: repeated,
the mean holds to about 2% (docs/performance.md, "The run path, a third time"). The cost of a call grows with
the calls served at once, so the default load matches the bench's throughput rows. Both trees run with this
checkout's interpreter and packages; `git worktree add /tmp/old COMMIT` makes the other one.

    scripts/cpu_pair --tree /tmp/old                 # 2 rounds of 8 s, 16 clients
    scripts/cpu_pair --tree /tmp/old --rounds 3 --seconds 10
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_bash import TMPFS, WARM_UP_RUNS, CpuSplit, _until_idle
from bench_support import REPO, Daemon, McpConnection

DAEMON = [sys.executable, "-c", "from hivebash.cli import daemon_main; daemon_main()"]
CALL = {"cmd": "true", "wait_seconds": 0}
SETTLE_SECONDS = 60  # at most, for the tasks of a warm-up or a load to end before a reading


def _load(daemons: list[Daemon], clients: int, seconds: float) -> int:
    """Calls `run` on every daemon in turn from each client until `seconds` pass; the rounds each made."""
    stop, counts, lock = time.monotonic() + seconds, [0], threading.Lock()

    def client(k: int) -> None:
        conns = [McpConnection(d.port) for d in daemons]
        order = conns if k % 2 == 0 else conns[::-1]
        made = 0
        while time.monotonic() < stop:
            for conn in order:
                conn.call("run", CALL)
            made += 1
        for conn in conns:
            conn.close()
        with lock:
            counts[0] += made

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts[0]


def one_run(trees: list[Path], clients: int, seconds: float) -> list[tuple[float, float]]:
    """Both daemons under one load: (own CPU ms, children's CPU ms) a task for each tree, in `trees` order."""
    with tempfile.TemporaryDirectory(dir=TMPFS if os.path.isdir(TMPFS) else None) as work:
        daemons = [Daemon(DAEMON, Path(work) / f"d{i}", env={"PYTHONPATH": str(tree), "HIVE_BASH_KEEP_TASKS": "100000"})
                   for i, tree in enumerate(trees)]
        try:
            conns = [McpConnection(d.port) for d in daemons]
            for conn in conns:
                for _ in range(WARM_UP_RUNS):
                    conn.call("run", CALL)
                _until_idle(conn, time.monotonic() + SETTLE_SECONDS)
            cpus = [CpuSplit(d.proc.pid) for d in daemons]
            tasks = _load(daemons, clients, seconds)
            for conn in conns:  # the last tasks end and are reaped: their CPU is the children's
                _until_idle(conn, time.monotonic() + SETTLE_SECONDS)
            return [cpu.per_task(tasks)[:2] for cpu in cpus]
        finally:
            for d in daemons:
                d.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="the other checkout")
    parser.add_argument("--clients", type=int, default=16,
                        help="client threads, each alternating (default 16: about 8 calls at once in each daemon, "
                             "the load of scripts/bench's throughput rows)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each load (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, of two runs each (default 2)")
    args = parser.parse_args()
    other = args.tree.resolve()
    if not (other / "hivebash").is_dir():
        parser.error(f"--tree: {other} holds no hivebash/ (a checkout of this repository is wanted)")
    if other == REPO:
        parser.error("--tree: that is this checkout; name another one (git worktree add /tmp/old COMMIT)")
    ratios = []
    print(f"this: {REPO}  other: {other}  ({args.clients} clients, {args.seconds:g} s loads)")
    for n in range(args.rounds):
        for trees in ([REPO, other], [other, REPO]):
            got = dict(zip(trees, one_run(trees, args.clients, args.seconds), strict=True))
            ratio = got[REPO][0] / got[other][0]
            ratios.append(ratio)
            print(f"  round {n + 1}, {'this' if trees[0] == REPO else 'other'} started first: daemon CPU a task "
                  f"this {got[REPO][0]:.3f} ms, other {got[other][0]:.3f} ms (children {got[REPO][1]:.3f} / "
                  f"{got[other][1]:.3f} ms); this/other {ratio:.3f}")
    mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"this/other, geometric mean of {len(ratios)} runs: {mean:.3f}")


if __name__ == "__main__":
    main()
