"""Start N ranks of a test script on this host and fail if any rank fails.

    launch.py --world N [--timeout S] SCRIPT [ARGS...]

Each rank runs `/usr/bin/python3 SCRIPT ARGS` with RANK, WORLD_SIZE and FERRY_TEST_STORE (a file
for torch's FileStore, fresh per launch) set; its output lines are prefixed with "[rank] ". A rank
that fails or outlives the timeout stops the others; the exit status is the first failure's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time


def relay(rank, stream, out):
    for line in iter(stream.readline, b""):
        out.write(f"[{rank}] {line.decode(errors='replace')}")
        out.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ferry-torch-") as tmp:
        procs, relays = [], []
        for rank in range(a.world):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(a.world),
                       FERRY_TEST_STORE=os.path.join(tmp, "store"), FERRY_TEST_TMP=tmp)
            p = subprocess.Popen([sys.executable, a.script] + a.args, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            t = threading.Thread(target=relay, args=(rank, p.stdout, sys.stdout), daemon=True)
            t.start()
            procs.append(p)
            relays.append(t)
        deadline = time.monotonic() + a.timeout
        status = 0
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                if not failed:
                    print(f"launch: ranks still running after {a.timeout:.0f} s: "
                          f"{[r for r, p in enumerate(procs) if p.poll() is None]}", flush=True)
                    status = 124
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.05)
        for p in procs:
            p.wait()
        for t in relays:
            t.join(timeout=5)
        for rank, p in enumerate(procs):
            if p.returncode != 0 and status == 0:
                print(f"launch: rank {rank} exited with {p.returncode}", flush=True)
                status = p.returncode if p.returncode > 0 else 1
        return status


if __name__ == "__main__":
    sys.exit(main())
