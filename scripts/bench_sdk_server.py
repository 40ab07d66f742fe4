"""The server a user would write instead, with the official SDK: the transport benchmark's baseline (`echo`)
and the bash benchmark's peer (`run`: `subprocess.run(["bash", "-c", cmd])`, output captured and returned).

Run as `python scripts/bench_sdk_server.py --port 0 --ready-file F`, like our daemons, under uvicorn.
"""

import argparse
import json
import os
import socket
import subprocess
import threading
import time

import uvicorn
from mcp.server.mcpserver import MCPServer

app = MCPServer("sdk-peer")


@app.tool()
def echo(text: str, times: int = 1) -> str:
    """Echo the text back, optionally repeated."""
    return text * times


@app.tool()
def run(cmd: str) -> str:
    """Run a shell command and return its exit code and output."""
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    return f"exit code {done.returncode}\n{done.stdout}{done.stderr}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    args = parser.parse_args()
    # uvicorn binds by itself (handing it a pre-bound socket loses its TCP_NODELAY set-up and costs a
    # 40 ms delayed-ACK stall per call, an unfair baseline); a free port is picked first.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", args.port))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(json_response=True), host="127.0.0.1", port=port,
                                          log_level="warning"))
    serving = threading.Thread(target=server.run)
    serving.start()
    # The ready file only once uvicorn listens: written before, a first call could find the port closed.
    while not server.started:
        if not serving.is_alive():
            raise SystemExit("uvicorn did not start")
        time.sleep(0.01)
    with open(args.ready_file + ".tmp", "w") as fh:
        json.dump({"url": f"http://127.0.0.1:{port}/mcp", "pid": os.getpid()}, fh)
    os.replace(args.ready_file + ".tmp", args.ready_file)
    serving.join()


if __name__ == "__main__":
    main()
