"""An Engine in its own process, as the daemon runs it (a child subreaper), driven by JSON lines on stdin.

Used by tests that need a real separate process: kill -9 and restart, setsid escapees re-parented to the
daemon. Not a test module (pytest collects only test_*.py).
"""

import json
import sys
from pathlib import Path

from common.config import BashSettings
from hivebash.engine import Engine, EngineError
from hivebash.processes.reaper import become_subreaper


def main() -> None:
    cfg = json.loads(sys.argv[1])
    cfg["state_dir"] = Path(cfg["state_dir"])
    engine = Engine(BashSettings(**cfg), subreaper=become_subreaper())
    engine.open()
    for line in sys.stdin:
        req = json.loads(line)
        op = req.pop("op")
        if "id" in req:
            req["task_id"] = req.pop("id")
        try:
            if op == "ping":
                reply = {"ok": True}
            elif op == "run":
                reply = engine.run(**req).view.to_dict()
            elif op == "status":
                reply = engine.status(**req).view.to_dict()
            elif op == "kill":
                reply = engine.kill(**req).view.to_dict()
            elif op == "shutdown":
                engine.shutdown()
                reply = {"ok": True}
            else:
                reply = {"error": f"unknown op {op}"}
        except EngineError as exc:
            reply = {"error": str(exc)}
        print(json.dumps(reply), flush=True)
        if op == "shutdown":
            return


if __name__ == "__main__":
    main()
