"""The fault suite: kill -9 and SIGTERM at several points of ``build medlama``, ``build context-variance``,
``rewire`` and ``probe``, two writers on one ``--out``, corrupt inputs, a full disk and a read-only file
system, and outputs placed where they would delete something (a user's files inside, the current
directory, folders named like leftovers); after each, the previous output must still load and a rerun
must complete. Outputs must follow the umask and leave no lock file behind. What a run must not take on
trust is tried too: a corpus edited in place behind its index, a resume shard of another model's run or
edited by hand, an adapter trained on another base, a comparison with a run on differently built data, a
Slurm that refuses the jobs, local paths (relative ones too) on their way to an upload.

    python tests/faults/harness.py --short   # a cut-down release (CI runs it part by part: --part probe)
    python tests/faults/harness.py           # the whole MedLAMA release (slower builds, same cases)

Every command runs as ``python -m medlama ...`` in a subprocess, as a user runs it, and is killed with
SIGKILL (nothing to clean up, no handler runs) or stopped with SIGTERM (it must clean up and exit 143).
The disk cases run in a private mount namespace (``unshare -rm``) on a small tmpfs; where user
namespaces are not allowed they are left out (said so in the report). Where a kill point cannot be hooked from outside without a
test-only switch in the product (the microseconds between moving the old output aside and the new one in),
the state such a kill leaves is made by hand, and the next run is checked against it.

A case *survives* when the earlier output still loads afterwards (``load_dataset(out, config)``,
``SentenceTransformer(out)``, ``json.load``) and the rerun completes; it is *lost* when the earlier output
no longer loads. An error that is not a one-line ``medlama: error:`` (a traceback) is counted as *unclear*.
The last line printed is the summary, ``faults: N tried, S survived, L lost (U unclear errors)``; the exit
status is 1 when anything was lost or did not survive.

A test harness, not a benchmark (those measure speed and memory), so it lives with the tests; it is not a
pytest module itself. One file although over the usual length: it is one list of cases, each a few lines, read top to bottom.

Needs the real data (``../shared/data``: the MedLAMA release and the rewiring corpora) and writes only
into a temporary folder (``--keep DIR`` to keep it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/faults/harness.py
SHARED = ROOT.parent / "shared" / "data"
DEAD_PID = 4_000_000  # above the kernel's pid_max: certainly not a live process


@dataclass
class Case:
    name: str
    survived: bool
    lost: bool
    clear: bool = True
    detail: str = ""


@dataclass
class Suite:
    root: Path
    short: bool
    cases: list[Case] = field(default_factory=list)

    # ---------------------------------------------------------------------------------- running
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
                   TOKENIZERS_PARALLELISM="false", MEDLAMA_CACHE=str(self.root / "cache"),
                   HF_DATASETS_CACHE=str(self.root / "hf-datasets"), PYTHONUNBUFFERED="1")
        return env

    def medlama(self, *args: str | Path, timeout: float = 600, umask: int | None = None,
                env: dict[str, str] | None = None, memory: int | None = None) -> subprocess.CompletedProcess:
        """``python -m medlama args`` in the suite's folder (``env``: variables to set besides the suite's;
        ``memory``: a limit on the process's address space, in bytes, as ``ulimit -v`` sets it)."""
        def limits() -> None:
            if umask is not None:
                os.umask(umask)
            if memory is not None:
                import resource  # POSIX only, and only for the memory-limited cases

                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

        return subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, args)], capture_output=True, text=True,
                              env={**self.env(), **(env or {})}, timeout=timeout, cwd=self.root,
                              preexec_fn=None if umask is None and memory is None else limits)

    def on_small_disk(self, copy: Path, args: list, make_it: str, kept: str | None = None
                      ) -> tuple[subprocess.CompletedProcess, bool]:
        """In a private mount namespace: a 4 MiB tmpfs, ``copy`` copied onto it (as ``copy.name``), the shell
        command ``make_it`` run (``$DISK``: the tmpfs), then ``medlama args`` with ``{out}`` in them standing
        for the copy. The run, and whether the copy came out byte for byte as it went in (with nothing beside
        it but what ``make_it`` put there, and ``kept``: a folder beside it the run may leave for its rerun)."""
        disk = self.root / f"disk-{len(self.cases)}"
        disk.mkdir()
        out = disk / copy.name
        words = " ".join(f"'{str(w).replace('{out}', str(out))}'" for w in [sys.executable, "-P", "-m", "medlama", *args])
        tree = f"find '{disk}' -type f -print0 | sort -z | xargs -0 -r sha256sum; find '{disk}' | sort"
        script = (f"set -e; DISK='{disk}'; mount -t tmpfs -o size=4m tmpfs \"$DISK\"; cp -a '{copy}' '{out}'; "
                  f"{make_it}; ({tree}) > '{disk}.before'; set +e; {words}; echo $? > '{disk}.status'; "
                  f"({tree}) > '{disk}.after'")
        done = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True, env=self.env(),
                              cwd=self.root, timeout=900)
        status = Path(f"{disk}.status")
        after = Path(f"{disk}.after").read_bytes() if status.is_file() else b""
        if kept is not None:  # e.g. a probe's completed shards, which its rerun continues from
            after = b"".join(line for line in after.splitlines(keepends=True)
                             if f"{disk}/{kept}".encode() not in line)
        same = status.is_file() and Path(f"{disk}.before").read_bytes() == after
        return subprocess.CompletedProcess(args, int(status.read_text()) if status.is_file() else -1, "",
                                           done.stderr), same

    def start(self, *args: str | Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-P", "-m", "medlama", *map(str, args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env=self.env(), cwd=self.root)

    def kill_when(self, args: list, when: Callable[[], bool], timeout: float = 300,
                  sig: signal.Signals = signal.SIGKILL) -> str:
        """Run ``medlama args`` and send it ``sig`` (SIGKILL) as soon as ``when()`` holds; what happened, in
        words (after SIGTERM, also its exit status and last line of stderr)."""
        process = self.start(*args)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            if when():
                process.send_signal(sig)
                err = process.communicate(timeout=120)[1]
                if sig == signal.SIGKILL:
                    return "killed"
                return f"killed: status {process.returncode}: {(err.strip().splitlines() or [''])[-1][:160]}"
            time.sleep(0.01)
        if process.poll() is None:
            process.kill()
            process.wait()
            return f"killed after {timeout:g}s"
        return f"finished (status {process.returncode}) before the kill point"

    def record(self, name: str, *, intact: bool, rerun: bool = True, clear: bool = True, detail: str = "") -> None:
        # A case survives only with its output intact, its rerun complete and any error a clear one.
        case = Case(name, survived=intact and rerun and clear, lost=not intact, clear=clear, detail=detail)
        self.cases.append(case)
        state = "LOST" if case.lost else "ok" if case.survived else "FAILED"
        note = "" if clear else " [unclear error]"
        print(f"  {state:6} {name}{note}: {detail}", flush=True)

    # ---------------------------------------------------------------------------------- checks
    @staticmethod
    def loads(out: Path, config: str) -> bool:
        # By the Parquet files' paths: load_dataset(str(out)) may answer from the cache of an earlier folder.
        from medlama.datasets.folders import load_config  # the datasets layer only when a built folder is read

        try:
            return load_config(out, config, "test").num_rows > 0
        except Exception:  # noqa: BLE001 - any failure to load is what this check reports
            return False

    @staticmethod
    def model_loads(out: Path) -> bool:
        from sentence_transformers import SentenceTransformer

        try:
            SentenceTransformer(str(out), device="cpu")
            return True
        except Exception:  # noqa: BLE001
            return False

    @staticmethod
    def json_loads(path: Path) -> bool:
        try:
            return bool(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return False

    @staticmethod
    def clear_error(result: subprocess.CompletedProcess, *needles: str) -> bool:
        err = result.stderr
        return (result.returncode == 2 and "Traceback" not in err and "medlama: error:" in err
                and all(needle in err for needle in needles))

    @staticmethod
    def staging(out: Path, old: bool = False) -> list[Path]:
        return [p for p in out.parent.glob(f".{out.name}.tmp-*") if p.name.startswith(f".{out.name}.tmp-old-") == old]


# ------------------------------------------------------------------------------------------ inputs
def medlama_release(suite: Suite, fresh: bool = True) -> tuple[Path, list[str]]:
    """The release the builds read, and the flags it needs: the real one, or (short) its first 40 queries
    per relation (their hard rows with them), which builds in seconds but is not the pinned bytes
    (``fresh=False``: the one made before)."""
    source = SHARED / "medlama"
    if not suite.short:
        return source, []
    target = suite.root / "medlama-release"
    if not fresh:
        return target, ["--no-verify"]
    (target / "2021AA").mkdir(parents=True)
    shutil.copy(source / "prompts.csv", target / "prompts.csv")
    for full in sorted((source / "2021AA").glob("*_1000.csv")):
        with open(full, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))[:41]
        _write_csv(target / "2021AA" / full.name, rows)
        heads = {tuple(row[:3]) for row in rows[1:]}
        for hard in (source / "2021AA").glob(full.name[: -len("1000.csv")] + "*_hard.csv"):
            with open(hard, newline="", encoding="utf-8") as handle:
                hard_rows = list(csv.reader(handle))
            _write_csv(target / "2021AA" / hard.name, [hard_rows[0]] + [r for r in hard_rows[1:] if tuple(r[:3]) in heads])
    return target, ["--no-verify"]


def reworded_release(suite: Suite) -> Path:
    """A copy of the release :func:`medlama_release` made, with another wording of the ``may_treat`` prompt: the
    same queries and answers, other prompt text (a build of it is other data)."""
    source, _ = medlama_release(suite, fresh=False)
    target = suite.root / "medlama-release-reworded"
    shutil.copytree(source, target)
    prompts = target / "prompts.csv"
    text = prompts.read_text(encoding="utf-8")
    prompts.write_text(text.replace("[X] might treat [Y] .", "[X] could treat [Y] .", 1), encoding="utf-8")
    return target


def lora_adapter(base: Path, folder: Path) -> Path | None:
    """A LoRA adapter trained (here: made) on the model ``base``, with non-zero weights; None without peft."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:  # the `peft` extra: the adapter case is left out (said so in the report)
        return None
    # torch and transformers only for the adapter case (the harness itself drives medlama as a command)
    import torch
    from transformers import AutoModel

    torch.manual_seed(1)
    with warnings.catch_warnings():  # transformers' deprecation notices, from inside peft: not this suite's report
        warnings.simplefilter("ignore", FutureWarning)
        model = get_peft_model(AutoModel.from_pretrained(str(base)),
                               LoraConfig(r=2, target_modules=["query", "value"], init_lora_weights=False))
        model.save_pretrained(folder)
    return folder


def _write_csv(path: Path, rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A random 2-layer BERT (hidden 32) with the bundled model's vocabulary (as tests/conftest.py makes);
    another ``seed``: another model of the same shapes."""
    import torch  # torch and transformers only when a model is made
    from transformers import AutoTokenizer, BertConfig, BertModel

    from medlama.core.defaults import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------------------------------ cases
def killed(what: str) -> bool:
    """Whether :meth:`Suite.kill_when` did kill the run (a run that finished first tested nothing)."""
    return what.startswith("killed")


def first_medlama_build(suite: Suite) -> tuple[Path, list]:
    """``build medlama`` of the release into ``root/medlama``: the folder and the command that built it."""
    source, flags = medlama_release(suite)
    out = suite.root / "medlama"
    build = ["build", "medlama", "--source", source, *flags, "--out", out]
    first = suite.medlama(*build)
    if first.returncode != 0 or not suite.loads(out, "hard"):
        raise SystemExit(f"the first MedLAMA build failed:\n{first.stderr[-3000:]}")
    return out, build


def medlama_cases(suite: Suite) -> Path:
    out, build = first_medlama_build(suite)
    source = build[3]

    what = suite.kill_when(build, lambda: False, timeout=1.5)
    suite.record("build medlama: kill -9 while reading the release", intact=suite.loads(out, "hard"),
                 rerun=killed(what), detail=what)

    what = suite.kill_when(build, lambda: bool(suite.staging(out)))
    suite.record("build medlama: kill -9 once its staging folder appears", intact=suite.loads(out, "hard"),
                 rerun=killed(what),
                 detail=f"{what}; {len(suite.staging(out))} staging folder(s) left for the next run to remove")

    earlier = set(suite.staging(out))  # the killed run's, until this run removes it: not this run's own
    what = suite.kill_when(build, lambda: bool(set(suite.staging(out)) - earlier), sig=signal.SIGTERM)
    left = suite.staging(out) + [p for p in [out.parent / f".{out.name}.lock"] if p.exists()]
    suite.record("build medlama: SIGTERM once its staging folder appears", intact=suite.loads(out, "hard"),
                 rerun=what.startswith("killed: status 143: medlama: terminated (SIGTERM)") and not left,
                 detail=f"{what}; {len(left)} staging folder(s) or lock file(s) left")

    # Two builds at once: the second is refused at once, the first completes.
    first_run = suite.start(*build)
    lock = out.parent / f".{out.name}.lock"
    deadline = time.monotonic() + 60
    # Until the lock names the first run (a killed run above left its own tag in the lock file).
    while time.monotonic() < deadline and first_run.poll() is None and not (
            lock.is_file() and lock.read_text().startswith(f"{first_run.pid}+")):
        time.sleep(0.05)
    started = time.monotonic()
    second = suite.medlama(*build)
    refused_in = time.monotonic() - started
    first_status = first_run.wait()
    busy = suite.clear_error(second, "is writing this output folder right now")
    suite.record("build medlama: two builds into one --out at once", intact=suite.loads(out, "hard"),
                 rerun=first_status == 0 and busy, clear=busy,
                 detail=f"first exit {first_status}; second exit {second.returncode} after {refused_in:.1f}s: "
                        f"{second.stderr.strip().splitlines()[-1] if second.stderr.strip() else ''}")

    # A kill between moving the old output aside and moving the new one in (made by hand: see the docstring),
    # followed by a run that fails on bad input: the previous output is put back and loads.
    host = "".join(c if c.isalnum() or c in "._-" else "_" for c in socket.gethostname())[:64]
    work = out.parent / f".{out.name}.tmp-{DEAD_PID}+0+{host}+abcd1234"  # as a killed run's staging folder is
    work.mkdir()
    (work / ".medlama-staging.json").write_text(json.dumps({"medlama": "staging", "target": out.name, "pid": DEAD_PID,
                                                            "start": 0, "host": host}))
    os.replace(out, work / "old")
    broken = suite.root / "release-non-utf8"
    shutil.copytree(source, broken)
    target = broken / "2021AA" / "may_treat_1000.csv"
    data = target.read_bytes()
    at = data.index(b"a", data.index(b"\n"))  # in the first data row, not the header
    target.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    result = suite.medlama("build", "medlama", "--source", broken, "--no-verify", "--out", out)
    suite.record("build medlama: kill -9 in the swap window, then a run on a non-UTF-8 CSV byte",
                 intact=suite.loads(out, "hard"), clear=suite.clear_error(result, "may_treat_1000.csv"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    corrupt = {
        "a duplicated release row": lambda d: _duplicate_row(d / "2021AA" / "may_treat_1000.csv"),
        "a missing release file": lambda d: (d / "2021AA" / "may_prevent_1000.csv").unlink(),
    }
    for name, corrupt_it in corrupt.items():
        copy = suite.root / f"release-{len(suite.cases)}"
        shutil.copytree(source, copy)
        corrupt_it(copy)
        result = suite.medlama("build", "medlama", "--source", copy, "--no-verify", "--out", out)
        suite.record(f"build medlama: {name}", intact=suite.loads(out, "hard"),
                     clear=suite.clear_error(result), detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    a_file = suite.root / "a-file"
    a_file.write_text("keep me")
    result = suite.medlama(*build[:-1], a_file)
    suite.record("build medlama: --out names an existing file", intact=a_file.read_text() == "keep me",
                 clear=suite.clear_error(result, "not a folder"), detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    # The rerun: an unexpected file in the release is warned about, and the build completes.
    extra = suite.root / "release-extra"
    shutil.copytree(source, extra)
    shutil.copy(extra / "2021AA" / "may_treat_1000.csv", extra / "2021AA" / "may_cure_1000.csv")
    result = suite.medlama(*build[:2], "--source", extra, "--no-verify", "--out", out)
    leftovers = suite.staging(out) + suite.staging(out, old=True)
    suite.record("build medlama: rerun (with an unexpected release file) completes",
                 intact=suite.loads(out, "hard"), rerun=result.returncode == 0 and "may_cure_1000.csv" in result.stderr
                 and not leftovers, detail=f"exit {result.returncode}; {len(leftovers)} leftover(s)")

    # A user's folders named like leftovers of a dead run (one like the old backup names): never touched.
    users = [out.parent / f".{out.name}.tmp-mine", out.parent / f".{out.name}.tmp-old-{DEAD_PID}+0+{host}",
             out.parent / f".{out.name}.tmp-{DEAD_PID}+0+{host}+notes"]
    for folder in users:
        (folder / "work").mkdir(parents=True)
        (folder / "work" / "keep.txt").write_text("mine")
    result = suite.medlama(*build)
    kept = all((folder / "work" / "keep.txt").read_text() == "mine" for folder in users)
    suite.record("build medlama: a user's folders named like leftovers beside --out", intact=suite.loads(out, "hard"),
                 rerun=result.returncode == 0 and kept, detail=f"exit {result.returncode}; user's folders kept: {kept}")
    for folder in users:
        shutil.rmtree(folder)

    # `--out .` from inside the build folder: replacing it would leave the shell in a deleted folder.
    inode = out.stat().st_ino
    result = subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, build[:-1]), "."], capture_output=True,
                            text=True, env=suite.env(), cwd=out, timeout=600)
    suite.record("build medlama: --out . inside the build folder", intact=suite.loads(out, "hard"),
                 rerun=out.stat().st_ino == inode, clear=suite.clear_error(result, "the current directory"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])
    return out


def _duplicate_row(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join([*lines, lines[1]]), encoding="utf-8")


def context_variance_cases(suite: Suite) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    import fake_slurm  # tests/helpers, on the path only for the Slurm cases
    from cv_inputs import write_corpora, write_medlama_folder

    kb = write_medlama_folder(suite.root / "cv-medlama")
    notes, pmc = write_corpora(suite.root / "cv-corpora")
    out = suite.root / "cv"
    build = ["build", "context-variance", "--medlama", kb, "--mimic", notes, "--pmc", pmc,
             "--index-dir", suite.root / "cv-index", "--out", out]
    first = suite.medlama(*build)
    if first.returncode != 0 or not suite.loads(out, "ehr_real"):
        raise SystemExit(f"the first context-variance build failed:\n{first.stderr[-3000:]}")
    what = suite.kill_when(build, lambda: bool(suite.staging(out)))
    suite.record("build context-variance: kill -9 once its staging folder appears",
                 intact=suite.loads(out, "ehr_real"), rerun=killed(what), detail=what)

    broken = suite.root / "cv-broken" / "NOTEEVENTS.csv"
    broken.parent.mkdir()
    broken.write_text(notes.read_text(encoding="utf-8").replace('dyspnea."\n', "dyspnea.\n"), encoding="utf-8")
    strict = [*build[:5], broken, *build[6:]]
    result = suite.medlama(*strict)
    intact = suite.loads(out, "ehr_real")
    rerun = suite.medlama(*strict, "--on-bad-record", "skip")
    suite.record("build context-variance: a MIMIC note with an unterminated quote (then --on-bad-record skip)",
                 intact=intact and suite.loads(out, "ehr_real"),
                 rerun=rerun.returncode == 0 and "left out 1 bad record(s)" in rerun.stderr,
                 clear=suite.clear_error(result, f"{broken}, line 3 (record 2)"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    # A text corpus with a byte that is not UTF-8 on line 1256: named at that line, not where a read block began.
    text = suite.root / "cv-sentences.txt"
    data = "".join(f"Sentence {i}: asthma with wheeze and cough, given salbutamol.\n" for i in range(1, 3001)).encode()
    at = data.index(b"Sentence 1256: ") + len(b"Sentence 1256: ")
    text.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    result = suite.medlama(*build[:4], "--corpus", f"sents:text:{text}", *build[8:])
    suite.record("build context-variance: a text corpus with a non-UTF-8 byte on line 1256",
                 intact=suite.loads(out, "ehr_real"),
                 clear=suite.clear_error(result, f"{text}, row 1256: not UTF-8: byte 0xff at byte 16 of the line"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    # One document of a million characters on one line (10,000 sentences, 50,000 mentions) under a 3 GB address
    # space: once a worker's memory grew with the square of its mentions (MemoryError, a broken process pool);
    # now it builds, in memory linear in the document.
    long = suite.root / "cv-long.txt"
    sentence = "The patient reports wheeze and cough at night, no rash, mild heartburn. Given salbutamol for asthma. "
    long.write_text((sentence * 10_000).strip() + "\nAsthma flare with wheeze.\n", encoding="utf-8")
    long_out = suite.root / "cv-long"
    result = suite.medlama(*build[:4], "--corpus", f"sents:text:{long}", "--index-dir", suite.root / "cv-index-long",
                           "--out", long_out, memory=3 * 1024 ** 3)
    suite.record("build context-variance: one 1 MB line (10,000 sentences) under a 3 GB memory limit",
                 intact=suite.loads(out, "ehr_real"),
                 rerun=result.returncode == 0 and suite.loads(long_out, "sents_real"),
                 clear=result.returncode == 0 or suite.clear_error(result, str(long)),
                 detail=f"exit {result.returncode}; {(result.stderr.strip().splitlines() or [''])[-1][:120]}")

    # sbatch that cannot reach its controller: one error quoting it, and no work folder of launch scripts left.
    slurm_index = suite.root / "cv-index-slurm"
    down = fake_slurm.install(suite.root / "slurm-down", failing=True)
    result = suite.medlama(*build[:8], "--index-dir", slurm_index, "--executor", "slurm", "--slurm-partition", "cpu",
                           "--out", out, env={"PATH": f"{down}{os.pathsep}{os.environ.get('PATH', '')}"})
    left = sorted(p.relative_to(slurm_index).as_posix() for p in slurm_index.rglob("*")) if slurm_index.exists() else []
    suite.record("build context-variance: --executor slurm when sbatch cannot reach its controller",
                 intact=suite.loads(out, "ehr_real"), rerun=not left,
                 clear=suite.clear_error(result, f"Slurm refused the index jobs: {fake_slurm.CONTROLLER_DOWN}"),
                 detail=f"left in the index folder: {left}; {(result.stderr.strip().splitlines() or [''])[-1][:120]}")

    # A corpus file edited in place with its size and modification time put back (cp -p, rsync -t, tar x): its
    # index is built again, and the sets quote the new text, never the old.
    before = notes.stat()
    notes.write_bytes(notes.read_bytes().replace(b"cough at night", b"cough at sleep"))  # CSV's \r\n kept
    os.utime(notes, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = notes.stat()
    result = suite.medlama(*build, "--json")
    reused = [s["index_reused"] for s in json.loads(result.stdout)["sources"]] if result.returncode == 0 else None
    quoted = _config_text(out, "ehr_real")
    suite.record("build context-variance: a corpus edited in place, its size and mtime kept",
                 intact=suite.loads(out, "ehr_real"),
                 rerun=(after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns) and reused is not None
                 and reused[0] is False and "cough at sleep" in quoted and "cough at night" not in quoted,
                 detail=f"exit {result.returncode}; index reused per source: {reused}; new text quoted: "
                        f"{'cough at sleep' in quoted}; old: {'cough at night' in quoted}")


def _config_text(out: Path, config: str) -> str:
    """Every value of every row of ``config`` of the built folder ``out``, as one text ("" if it does not load)."""
    from medlama.datasets.folders import load_config  # the datasets layer only when a built folder is read

    try:
        return " ".join(str(value) for row in load_config(out, config, "test") for value in row.values())
    except Exception:  # noqa: BLE001 - a folder that does not load quotes nothing
        return ""


def rewire_cases(suite: Suite, model: Path) -> Path:
    corpus = suite.root / "sentences.txt"
    with open(sorted((SHARED / "elicit_corpora").glob("pubmed_sents*"))[0], encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(300), handle)), encoding="utf-8")
    out = suite.root / "rewired"
    base = ["rewire", "--corpus", corpus, "--out", out, "--model", model, "--preset", "demo", "--batch-size", "8",
            "--max-length", "24", "--save-steps", "2", "--logging-steps", "1", "--skip-short-lines"]
    first = suite.medlama(*base, "--steps", "4")
    if first.returncode != 0 or not suite.model_loads(out):
        raise SystemExit(f"the first rewiring failed:\n{first.stderr[-3000:]}")
    checkpoints = out / "checkpoints"

    what = suite.kill_when([*base, "--steps", "12"], lambda: (checkpoints / "checkpoint-6").is_dir())
    suite.record("rewire: kill -9 while training (after checkpoint-6)", intact=suite.model_loads(out),
                 rerun=killed(what), detail=what)

    what = suite.kill_when([*base, "--steps", "12"], lambda: any(checkpoints.glob(".checkpoint-*.staging")))
    suite.record("rewire: kill -9 while a checkpoint is being saved", intact=suite.model_loads(out),
                 rerun=killed(what), detail=what)

    result = suite.medlama(*base, "--model", suite.root / "no-such-model", "--steps", "12")  # the last --model wins
    suite.record("rewire: a model path that does not exist", intact=suite.model_loads(out),
                 clear=suite.clear_error(result, "no-such-model"), detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    result = suite.medlama(*base, "--steps", "12", umask=0o027)
    done = json.loads((out / "rewire_config.json").read_text())["training"]["global_step"] if result.returncode == 0 else None
    suite.record("rewire: rerun resumes and completes", intact=suite.model_loads(out),
                 rerun=done == 12, detail=f"exit {result.returncode}, final step {done}")
    private = sorted(p.relative_to(out).as_posix() for p in [out, *out.rglob("*")]
                     if p.stat().st_mode & 0o777 != (0o750 if p.is_dir() else 0o640))
    suite.record("rewire: the model, its card and checkpoints follow umask 027", intact=suite.model_loads(out),
                 rerun=not private, detail=f"{len(private)} path(s) with other modes: {private[:4]}")

    dry = suite.root / "push-dry"
    result = suite.medlama("push-model", out, "someone/rewired", "--dry-run", dry)
    local = [str(suite.root), str(Path.home()), sys.prefix]
    named = [p.relative_to(dry).as_posix() for p in (dry / "files").rglob("*") if p.is_file()
             and any(path.encode() in p.read_bytes() for path in local)]
    hidden = [p.name for p in (dry / "files").rglob(".*")]
    suite.record("push-model: no pushed file names a local path or a hidden file", intact=suite.model_loads(out),
                 rerun=result.returncode == 0 and not named and not hidden,
                 detail=f"exit {result.returncode}; files naming a local path: {named}; hidden: {hidden}")
    return out


def probe_cases(suite: Suite, data: Path, model: Path) -> None:
    from medlama.core.resume import work_folder  # medlama in-process only for where a run keeps its shards

    out = suite.root / "probe"
    base = ["probe", "--data", data, "--model", model, "--relations", "may_treat", "--batch-size", "16",
            "--overwrite", "--out", out]  # --overwrite: each run replaces the previous probe's output
    first = suite.medlama(*base)
    results = out / "results.json"
    if first.returncode != 0 or not suite.json_loads(results):
        raise SystemExit(f"the first probe failed:\n{first.stderr[-3000:]}")
    what = suite.kill_when(base, lambda: bool(suite.staging(out)))
    suite.record("probe: kill -9 once its staging folder appears", intact=suite.json_loads(results),
                 rerun=killed(what), detail=what)
    # Its completed shard, kept aside for the shard cases below (the next run's --overwrite discards it)
    done = sorted((work_folder(out) / "shards").glob("*.jsonl"))
    kept = suite.root / "kept-shards" / done[0].name if done else None
    if kept is not None:
        kept.parent.mkdir()
        shutil.copyfile(done[0], kept)
    for name, change, needle in (("--batch-size 0", ["--batch-size", "0"], "batch size"),
                                 ("a model path that does not exist", ["--model", suite.root / "no-such-model"],
                                  "does not exist")):
        args = [*base]
        at = args.index(change[0])
        args[at + 1] = change[1]
        result = suite.medlama(*args)
        suite.record(f"probe: {name}", intact=suite.json_loads(results), clear=suite.clear_error(result, needle),
                     detail=(result.stderr.strip().splitlines() or [""])[-1][:160])
    # compare against a copy whose hit@k were swapped by hand (the mean unchanged): refused, naming the file
    edited = suite.root / "probe-edited"
    shutil.copytree(out, edited)
    rows = [json.loads(line) for line in (edited / "predictions.jsonl").read_text().splitlines()]
    hits = [i for i, r in enumerate(rows) if r["hit@10"]]
    misses = [i for i, r in enumerate(rows) if not r["hit@10"]]
    for i in (hits[:1] + misses[:1]) or [0]:  # a hit and a miss swapped (or one row flipped)
        rows[i]["hit@10"] = not rows[i]["hit@10"]
    (edited / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = suite.medlama("compare", out, edited)
    suite.record("compare: a run whose hit@k were swapped by hand", intact=suite.json_loads(results),
                 clear=suite.clear_error(result, "predictions.jsonl"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])
    shutil.rmtree(edited)
    a_file = suite.root / "probe-file"
    a_file.write_text("keep me")
    result = suite.medlama(*base[:-1], a_file)
    suite.record("probe: --out names an existing file", intact=a_file.read_text() == "keep me" and suite.json_loads(results),
                 clear=suite.clear_error(result), detail=(result.stderr.strip().splitlines() or [""])[-1][:160])
    # The rerun, with umask 027: collaborators read results, so folders are 0750 and files 0640, as mkdir and
    # open make them. Its paths are given relative to the current directory (./medlama, ./tiny-bert, ./probe).
    relative = [f"./{Path(word).relative_to(suite.root).as_posix()}" if isinstance(word, Path) else word
                for word in base]
    result = suite.medlama(*relative, umask=0o027)
    suite.record("probe: rerun (paths given relative) completes", intact=suite.json_loads(results),
                 rerun=result.returncode == 0, detail=f"exit {result.returncode}")
    modes = {oct(p.stat().st_mode & 0o777) for p in [out, *out.rglob("*")] if p.is_dir()} | \
        {oct(p.stat().st_mode & 0o777) for p in out.rglob("*") if p.is_file()}
    suite.record("probe: outputs follow umask 027", intact=suite.json_loads(results),
                 rerun=result.returncode == 0 and modes == {"0o750", "0o640"}, detail=f"exit {result.returncode}; "
                 f"modes {sorted(modes)}")
    # push-results of it: no local path reaches the upload, relative (as typed) or absolute.
    dry = suite.root / "push-results-dry"
    pushed = suite.medlama("push-results", "./probe", "someone/probe-results", "--dry-run", dry)
    local = [str(suite.root), str(Path.home()), sys.prefix, *(w for w in relative if w.startswith("./"))]
    tree = dry / "probe-results"  # the upload (beside it, the dry run's own manifest, which stays here)
    named = sorted({f"{p.relative_to(tree).as_posix()}: {path}" for p in tree.rglob("*") if p.is_file()
                    for path in local if path.encode() in p.read_bytes()})
    suite.record("push-results: a run given relative paths names none of them in the upload",
                 intact=suite.json_loads(results), rerun=pushed.returncode == 0 and tree.is_dir() and not named,
                 detail=f"exit {pushed.returncode}; local paths named: {named[:4]}")

    shard_and_adapter_cases(suite, data, model, out, kept)

    # A probe written into the build folder, and the user's notes there: a rebuild names them, deletes nothing.
    run1 = data / "run1"
    result = suite.medlama(*base[:-1], run1)
    (data / "notes.txt").write_text("my notes")
    source, flags = medlama_release(suite, fresh=False)
    rebuild = suite.medlama("build", "medlama", "--source", source, *flags, "--out", data)
    intact = suite.json_loads(run1 / "results.json") and (data / "notes.txt").read_text() == "my notes"
    suite.record("build medlama: a probe output and a user's notes inside the build folder",
                 intact=intact and suite.loads(data, "hard"), rerun=result.returncode == 0,
                 clear=suite.clear_error(rebuild, "notes.txt, run1/"),
                 detail=(rebuild.stderr.strip().splitlines() or [""])[-1][:160])
    shutil.rmtree(run1)
    (data / "notes.txt").unlink()

    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        print("  (left out: the full-disk and read-only cases need user namespaces, `unshare -rm`)", flush=True)
        return
    rerun = [*base[:-1], "{out}"]
    full = 'free=$(df --output=avail -B4096 "$DISK" | tail -1); dd if=/dev/zero of="$DISK/filler" bs=4096 ' \
           'count=$((free - 24)) 2>/dev/null'
    for name, make_it, needle in (("a full disk", full, "No space left on device"),
                                  ("a read-only file system", 'mount -o remount,ro "$DISK"', "Read-only file system")):
        # the shards completed before the disk refused the results are kept beside them for the rerun
        result, same = suite.on_small_disk(out, rerun, make_it, kept=f".{out.name}.work")
        suite.record(f"probe: {name} (results and plots)", intact=same, clear=suite.clear_error(result, needle),
                     detail=(result.stderr.strip().splitlines() or [""])[-1][:160])


def shard_and_adapter_cases(suite: Suite, data: Path, model: Path, out: Path, kept: Path | None) -> None:
    """What a probe refuses to take from elsewhere: a resume shard of another model's run or edited by hand (each
    named), a comparison with a run on differently built data, an adapter trained on another base model.
    ``out``: a finished probe of ``model`` on ``data``; ``kept``: a completed shard of it (that a kill left)."""
    from medlama.core.resume import work_folder  # medlama in-process only for where a run keeps its shards

    results = out / "results.json"
    # Another model of the same name (so of the same label), on a build of the release with another prompt
    # wording, killed once its shards are done (they stay beside its output, for the rerun to continue from)
    other = tiny_bert(suite.root / "other" / model.name, seed=1)
    reworded = suite.root / "medlama-reworded"
    built = suite.medlama("build", "medlama", "--source", reworded_release(suite), "--no-verify", "--out", reworded)
    theirs = ["probe", "--data", reworded, "--model", other, "--relations", "may_treat", "--batch-size", "16",
              "--out", suite.root / "probe-other"]
    what = suite.kill_when(theirs, lambda: bool(suite.staging(theirs[-1])))
    shards = sorted((work_folder(theirs[-1]) / "shards").glob("*.jsonl"))
    if not (killed(what) and built.returncode == 0 and kept is not None and [s.name for s in shards] == [kept.name]):
        suite.record("probe: a killed run's shards to resume from", intact=suite.json_loads(results), rerun=False,
                     detail=f"{what}; build exit {built.returncode}; shards {[s.name for s in shards]}, kept {kept}")
        return
    (shard,), original = shards, shards[0].read_bytes()

    shutil.copyfile(kept, shard)  # the same shard (label, queries) of the first model's run
    result = suite.medlama(*theirs)
    suite.record("probe: resume from a shard of another model's run (same label)", intact=suite.json_loads(results),
                 clear=suite.clear_error(result, f"{shard}: a completed shard was not written by this run"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])

    lines = original.decode("utf-8").splitlines(keepends=True)
    edited = {**json.loads(lines[1]), "by": "hand"}  # one query's row changed
    shard.write_text("".join([lines[0], json.dumps(edited) + "\n", *lines[2:]]), encoding="utf-8")
    result = suite.medlama(*theirs)
    shard.write_bytes(original)  # as the run wrote it: the rerun continues from it
    resumed = suite.medlama(*theirs)
    suite.record("probe: resume from a shard edited by hand (then as written)", intact=suite.json_loads(results),
                 rerun=resumed.returncode == 0 and "continuing an interrupted probe" in resumed.stderr,
                 clear=suite.clear_error(result, f"{shard}: a completed shard has changed since it was written"),
                 detail=f"{(result.stderr.strip().splitlines() or [''])[-1][:140]}; then exit {resumed.returncode}")

    compared = suite.medlama("compare", out, theirs[-1])
    suite.record("compare: runs on differently built data (another prompt wording)", intact=suite.json_loads(results),
                 clear=suite.clear_error(compared, "differ in their data files (SHA-256)"),
                 detail=(compared.stderr.strip().splitlines() or [""])[-1][:160])

    adapter = lora_adapter(other, suite.root / "adapter-of-other")
    if adapter is None:
        print("  (left out: the adapter case needs peft, the `peft` extra)", flush=True)
        return
    result = suite.medlama("probe", "--data", data, "--model", model, "--peft", adapter, "--relations", "may_treat",
                           "--out", suite.root / "probe-peft")
    suite.record("probe: a PEFT adapter trained on another base model", intact=suite.json_loads(results),
                 rerun=not (suite.root / "probe-peft").exists(),
                 clear=suite.clear_error(result, f"the adapter was trained on {str(other)!r}"),
                 detail=(result.stderr.strip().splitlines() or [""])[-1][:160])


def ucm_cases(suite: Suite) -> None:
    import medlama.metrics  # the metrics only for the UCM cases

    ucm = medlama.metrics.load("ucm", keep_in_memory=True, cache_dir=str(suite.root / "ucm-cache"))
    try:
        ucm.compute(target_rank_before=[1, 2], target_rank_after=[10**30, 3], added_is_correct=[True, False])
        message, clear = "accepted", False
    except ValueError as error:
        message, clear = str(error), "target_rank_after[0]" in str(error)
    except Exception as error:  # noqa: BLE001 - an OverflowError from pyarrow is what this case looks for
        message, clear = f"{type(error).__name__}: {error}", False
    works = ucm.compute(target_rank_before=[1], target_rank_after=[2], added_is_correct=[True])["num_records"] == 1
    suite.record("UCM metric: a rank of 10**30", intact=works, clear=clear, detail=message[:160])


# ------------------------------------------------------------------------------------------ main
#: The suite's parts, each runnable alone (``--part``; CI runs them as separate tests, side by side): the
#: probe part builds the release it probes first, as the MedLAMA part does.
PARTS = ("medlama", "context-variance", "rewire", "probe")


def run(root: Path, short: bool, parts: tuple[str, ...] = PARTS) -> Suite:
    suite = Suite(root, short)
    started = time.monotonic()
    model = tiny_bert(root / "tiny-bert") if {"rewire", "probe"} & set(parts) else None
    data = medlama_cases(suite) if "medlama" in parts else None
    if "context-variance" in parts:
        context_variance_cases(suite)
        ucm_cases(suite)
    if "rewire" in parts:
        rewire_cases(suite, model)
    if "probe" in parts:
        probe_cases(suite, data or first_medlama_build(suite)[0], model)
    locks = sorted(p.relative_to(root).as_posix() for folder in (root, root / "medlama", root / "rewired" /
                   "checkpoints") for p in folder.glob(".*.lock"))
    suite.record("no lock file left beside any output", intact=True, rerun=not locks, detail=f"left: {locks}")
    tried, survived = len(suite.cases), sum(c.survived for c in suite.cases)
    lost, unclear = sum(c.lost for c in suite.cases), sum(not c.clear for c in suite.cases)
    print(f"({time.monotonic() - started:.0f}s)")
    print(f"faults: {tried} tried, {survived} survived, {lost} lost ({unclear} unclear errors)", flush=True)
    return suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="a cut-down MedLAMA release (CI)")
    parser.add_argument("--part", choices=PARTS, action="append", help="run only this part's cases (repeatable)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args(argv)
    parts = tuple(args.part or PARTS)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=False)
        suite = run(args.keep.resolve(), args.short, parts)
    else:
        with tempfile.TemporaryDirectory(prefix="medlama-faults-") as scratch:
            suite = run(Path(scratch), args.short, parts)
    return 0 if all(c.survived and not c.lost for c in suite.cases) else 1


if __name__ == "__main__":
    sys.exit(main())
