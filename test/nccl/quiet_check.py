#!/usr/bin/python3
"""NCCL's quiet default: with neither NCCL_DEBUG nor FERRY_DEBUG set, ferry's libnccl.so.2 writes
nothing on stderr except one WARN line per error an entry point returned.

Usage: quiet_check.py PROGRAM

PROGRAM is a client (client_228) that makes calls fail on purpose and prints "expected errors: N"
last on stdout. It runs with LD_BIND_NOW=1 and the logging variables removed; it must exit 0 and
its stderr must hold exactly N lines, each a WARN line naming an nccl function.
"""
import os
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_DEBUG", "FERRY_DEBUG")}
    env["LD_BIND_NOW"] = "1"
    run = subprocess.run([sys.argv[1]], env=env, capture_output=True, text=True, timeout=100)
    print(run.stdout, end="")
    m = re.search(r"^expected errors: (\d+)$", run.stdout, re.M)
    lines = run.stderr.splitlines()
    failures = []
    if run.returncode != 0:
        failures.append("%s exited %d" % (sys.argv[1], run.returncode))
    if m is None:
        failures.append("no 'expected errors' line on stdout")
    elif len(lines) != int(m.group(1)):
        failures.append("stderr has %d line(s), expected %s (one per returned error)" % (len(lines), m.group(1)))
    stray = [line for line in lines if not re.search(r"WARN .*nccl[A-Z]\w*", line)]
    if stray:
        failures.append("stderr lines that are not an error's WARN line: %r" % stray[:5])
    print("stderr: %d line(s)" % len(lines))
    for line in lines[:3]:
        print("  " + line)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
