"""Load over the remote transports: acp-agent's server next to the TypeScript SDK's ``AcpServer``, same workload.

For each server (``python -m acp_agent serve bench/agents/sdk_agent.py`` on uvicorn, and
``bench/agents/ts_http_server.mjs``: ``AcpServer`` on Node's http server with ``ws``), each transport (WebSocket,
Streamable HTTP) and each connection count N, a fresh server is started on loopback and ``bench/remote_load.mjs``
opens N concurrent connections, each running one ``stream S`` turn and K ``echo`` turns. Reported: echo turns per
second of wall time and per second of server CPU (utime+stime from /proc), echo p50/p99, the server's peak RSS.
Not a timed test: bounded in time, nothing fails on a slow number.

    .venv/bin/python bench/remote_load.py [--connections 100,500] [--echo 20] [--stream 200] [--transports ws,http]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def start(server: str) -> tuple[subprocess.Popen[str], str]:
    if server == "acp-agent":
        # Sessions in memory: the TypeScript server keeps none either (the default store is the agent's SQLite file).
        command = [sys.executable, "-m", "acp_agent", "serve", "bench/agents/sdk_agent.py", "--port", "0",
                   "--max-connections", "5000", "--store", os.environ.get("ACP_BENCH_STORE", "memory")]
        pattern = re.compile(r"at (http://\S+)")
    else:
        command = ["node", "bench/agents/ts_http_server.mjs"]
        pattern = re.compile(r"listening (http://\S+)")
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stderr is not None
    for line in proc.stderr:
        match = pattern.search(line)
        if match:
            return proc, match.group(1)
    raise RuntimeError(f"{server} did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", default="100,500")
    parser.add_argument("--echo", type=int, default=20, help="echo turns per connection")
    parser.add_argument("--stream", type=int, default=200, help="chunks of the one stream turn per connection")
    parser.add_argument("--servers", default="acp-agent,ts-sdk")
    parser.add_argument("--transports", default="ws,http")
    args = parser.parse_args()
    rows = []
    for n in [int(x) for x in args.connections.split(",")]:
        for transport in args.transports.split(","):
            for server in args.servers.split(","):
                proc, url = start(server)
                try:
                    before = cpu_seconds(proc.pid)
                    client = subprocess.run(
                        ["node", "bench/remote_load.mjs", url, transport, str(n), str(args.echo), str(args.stream)],
                        cwd=ROOT, capture_output=True, text=True, timeout=300,
                    )
                    cpu = cpu_seconds(proc.pid) - before
                    rss = peak_rss_mb(proc.pid)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                if client.returncode != 0:
                    print(f"{server} {transport} N={n}: client failed\n{client.stderr[-2000:]}", file=sys.stderr)
                    continue
                result = json.loads(client.stdout.strip().splitlines()[-1])
                if result["failures"]:
                    reasons = sorted(set(client.stderr.splitlines()))[:5]
                    print(f"{server} {transport} N={n}: failures: {reasons}", file=sys.stderr)
                result.update(server=server, serverCpuSeconds=cpu, peakRssMB=rss)
                result["echoPerSecond"] = result["echoTurns"] / result["runSeconds"]
                result["turnsPerCpuSecond"] = (result["echoTurns"] + n) / cpu if cpu else float("nan")
                rows.append(result)
                print(json.dumps(result), file=sys.stderr)
                time.sleep(0.5)
    print(f"{'server':<10} {'transport':<9} {'N':>5} {'fail':>4} {'echo/s':>8} {'turns/CPU-s':>11} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>7}")
    for r in rows:
        print(f"{r['server']:<10} {r['transport']:<9} {r['connections']:>5} {r['failures']:>4} "
              f"{r['echoPerSecond']:>8.0f} {r['turnsPerCpuSecond']:>11.0f} {r['p50ms']:>8.1f} {r['p99ms']:>8.1f} "
              f"{r['peakRssMB']:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
