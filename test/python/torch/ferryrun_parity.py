"""Run gloo_script.py under ferryrun twice, as written ("gloo") and with only the backend name
changed to "ferry", and require the same output (issue 40).

    ferryrun_parity.py FERRYRUN RANKS
"""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ferryrun, ranks = sys.argv[1], sys.argv[2]
src = open(os.path.join(here, "gloo_script.py")).read()
assert src.count('init_process_group("gloo")') == 1
outputs = {}
with tempfile.TemporaryDirectory(prefix="ferry-parity-") as tmp:
    for backend in ("gloo", "ferry"):
        path = os.path.join(tmp, f"script_{backend}.py")
        with open(path, "w") as f:
            f.write(src.replace('init_process_group("gloo")', f'init_process_group("{backend}")'))
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        r = subprocess.run([ferryrun, "-n", ranks, "--timeout", "60", sys.executable, path], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
        lines = sorted(line for line in r.stdout.splitlines() if "Warning" not in line and "warn" not in line)
        print(f"--- {backend}: exit {r.returncode}\n" + r.stdout[-3000:])
        if r.returncode != 0:
            sys.exit(f"ferryrun_parity: the {backend} run failed (exit {r.returncode})")
        outputs[backend] = lines
if outputs["gloo"] != outputs["ferry"] or not outputs["gloo"]:
    sys.exit("ferryrun_parity: outputs differ:\n gloo:  %s\n ferry: %s" % (outputs["gloo"], outputs["ferry"]))
print(f"ferryrun_parity: {len(outputs['gloo'])} lines equal at {ranks} ranks")
