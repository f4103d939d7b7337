"""A stand-in Slurm on this machine for tests: ``sbatch`` runs each submitted job script at once (every task of
its array, one after another, as Slurm would run them on nodes), ``srun`` runs its command here, ``scontrol``
names this host. Jobs run in submission order, so a job's ``--dependency`` on an earlier one always holds. A
``failing`` sbatch answers as one that cannot reach its controller."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

#: What a real sbatch prints when the controller cannot be reached.
CONTROLLER_DOWN = ("sbatch: error: Batch job submission failed: Unable to contact slurm controller "
                   "(connect failure)")

_SBATCH = '''#!{python}
import itertools, os, re, subprocess, sys
args, script = sys.argv[1:-1], sys.argv[-1]
env = dict(os.environ)
for arg in args:
    if arg.startswith("--export="):
        for pair in arg[len("--export="):].split(",")[1:]:
            key, _, value = pair.partition("=")
            env[key] = value
counter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs")
job = (int(open(counter).read()) if os.path.exists(counter) else 100) + 1
open(counter, "w").write(str(job))
text = open(script).read()
found = re.search(r"^#SBATCH --array=(\\d+)-(\\d+)", text, re.M)
tasks = range(int(found.group(1)), int(found.group(2)) + 1) if found else [None]
log = open(os.path.join(os.path.dirname(counter), "jobs.log"), "a")
for task in tasks:
    run_env = {{**env, "SLURM_JOB_ID": str(job), "SLURM_NODELIST": "localhost", "SLURM_NODEID": "0"}}
    if task is not None:
        run_env["SLURM_ARRAY_TASK_ID"] = str(task)
    done = subprocess.run(["bash", script], env=run_env, stdout=log, stderr=log)
    log.write(f"job {{job}} task {{task}}: exit {{done.returncode}}\\n")
print(f"Submitted batch job {{job}}")
'''

_SRUN = '''#!/bin/bash
# drop srun's own options (-l, -n N, --key=value) and run the command here
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-N) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
'''

_SCONTROL = '''#!/bin/bash
echo localhost
'''

_FAILING_SBATCH = f'''#!/bin/bash
echo "{CONTROLLER_DOWN}" >&2
exit 1
'''


def install(folder: Path, *, failing: bool = False) -> Path:
    """Write the stand-in commands into ``folder``; returns it, to put first on ``PATH``."""
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {"sbatch": _FAILING_SBATCH if failing else _SBATCH.format(python=sys.executable),
               "srun": _SRUN, "scontrol": _SCONTROL}
    for name, text in scripts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def on_path(folder: Path) -> str:
    """``PATH`` with ``folder`` first."""
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
