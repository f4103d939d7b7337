"""The ten reproductions of issue 12, run again: one outcome line per defect (``fixed`` or ``NOT FIXED``).

    python benchmarks/issue12_repro.py            # MedLAMA builds from a cut-down copy of the release
    python benchmarks/issue12_repro.py --full     # from the whole release (slower)

Uses the fault suite's helpers (``benchmarks/faults.py``) and the real data in ``../shared/data``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faults import ROOT, Suite, medlama_release, tiny_bert  # noqa: E402


def last_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    return lines[-1][:150] if lines else f"exit {result.returncode}"


def reproduce(suite: Suite) -> list[tuple[int, bool, str]]:
    outcomes: list[tuple[int, bool, str]] = []
    source, flags = medlama_release(suite)
    out = suite.root / "out-medlama"
    build = ["build", "medlama", "--source", source, *flags, "--out", out]

    # 1. Two builds into one --out at once.
    first = suite.start(*build)
    lock = out.parent / f".{out.name}.lock"
    while first.poll() is None and not (lock.is_file() and lock.read_text().strip()):
        time.sleep(0.05)
    second = suite.medlama(*build)
    status = first.wait()
    ok = status == 0 and suite.clear_error(second, "writing this output folder right now") and suite.loads(out, "full")
    outcomes.append((1, ok, f"first exit {status}, second: {last_line(second)}; load_dataset(out, 'full') works"))

    # 2. MIMIC NOTEEVENTS with an unterminated quote.
    from cv_inputs import write_corpora, write_medlama_folder

    notes, _ = write_corpora(suite.root / "cv")
    notes.write_text(notes.read_text(encoding="utf-8").replace('dyspnea."\n', "dyspnea.\n"), encoding="utf-8")
    cv = ["build", "context-variance", "--medlama", write_medlama_folder(suite.root / "cv-kb"), "--mimic", notes,
          "--index-dir", suite.root / "cv-index", "--out", suite.root / "out-cv"]
    strict, lenient = suite.medlama(*cv), suite.medlama(*cv, "--on-bad-record", "skip")
    ok = suite.clear_error(strict, "line 3 (record 2)") and lenient.returncode == 0 and "left out 1 bad record" in lenient.stderr
    outcomes.append((2, ok, f"{last_line(strict)} | with --on-bad-record skip: exit {lenient.returncode}"))

    # 3. push-model uploads absolute local paths.
    model = tiny_bert(suite.root / "tiny-bert")
    corpus = suite.root / "sentences.txt"
    corpus.write_text("".join(line for _, line in zip(range(200), open(
        sorted((ROOT.parent / "shared" / "data" / "elicit_corpora").glob("pubmed_sents*"))[0], encoding="utf-8"))),
        encoding="utf-8")
    rewired = suite.root / "rewired"
    rewire = ["rewire", "--corpus", corpus, "--out", rewired, "--model", model, "--preset", "demo", "--batch-size", "8",
              "--max-length", "24", "--steps", "4", "--save-steps", "2", "--skip-short-lines"]
    trained = suite.medlama(*rewire)
    dry = suite.root / "dry"
    pushed = suite.medlama("push-model", rewired, "someone/model", "--dry-run", dry)
    local = [str(suite.root), str(Path.home()), sys.prefix]
    leaks = [p.name for p in (dry / "files").rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in local)]
    ok = trained.returncode == 0 and pushed.returncode == 0 and not leaks
    outcomes.append((3, ok, f"push-model --dry-run exit {pushed.returncode}; files naming a local path: {leaks}"))

    # 4. A non-UTF-8 byte in a MedLAMA CSV.
    bad = suite.root / "release-bad-byte"
    shutil.copytree(source, bad)
    csv_file = bad / "2021AA" / "may_treat_1000.csv"
    data = csv_file.read_bytes()
    at = data.index(b"a", data.index(b"\n"))
    csv_file.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    result = suite.medlama("build", "medlama", "--source", bad, "--no-verify", "--out", suite.root / "out-4")
    outcomes.append((4, suite.clear_error(result, "may_treat_1000.csv", "row"), last_line(result)))

    # 5. An interrupted checkpoint save blocks the auto-resume.
    last = rewired / "checkpoints" / "checkpoint-4"
    (last / "optimizer.pt").unlink()  # what a kill in the middle of an older version's save left
    resumed = suite.medlama(*rewire, "--steps", "6")  # the last --steps wins
    ok = resumed.returncode == 0 and "Set aside" in resumed.stderr and suite.model_loads(rewired)
    note = next((line for line in resumed.stderr.splitlines() if "Set aside" in line), last_line(resumed))
    outcomes.append((5, ok, note[:150]))

    # 6. A duplicated row in a release CSV.
    dup = suite.root / "release-dup"
    shutil.copytree(source, dup)
    lines = (dup / "2021AA" / "may_treat_1000.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (dup / "2021AA" / "may_treat_1000.csv").write_text("".join([*lines, lines[1]]), encoding="utf-8")
    result = suite.medlama("build", "medlama", "--source", dup, "--no-verify", "--out", suite.root / "out-6")
    outcomes.append((6, suite.clear_error(result, "duplicate query"), last_line(result)))

    # 7. Any folder holding a build_info.json is replaced.
    by_hand = suite.root / "by-hand"
    by_hand.mkdir()
    (by_hand / "build_info.json").write_text("{}")
    refused_hand = suite.medlama(*build[:-1], by_hand)
    from medlama.atomic import write_owner

    other = suite.root / "biolama-folder"
    other.mkdir()
    (other / "build_info.json").write_text("{}")
    write_owner(other, "build biolama")
    refused_other = suite.medlama(*build[:-1], other)
    ok = suite.clear_error(refused_hand, "nothing was changed") and suite.clear_error(refused_other, "build biolama") \
        and (by_hand / "build_info.json").read_text() == "{}" and (other / "build_info.json").read_text() == "{}"
    outcomes.append((7, ok, f"{last_line(refused_hand)} | {last_line(refused_other)}"))

    # 8. Probe tracebacks: --batch-size 0; --out naming an existing file.
    probe = ["probe", "--data", out, "--model", model, "--relations", "may_treat"]
    zero = suite.medlama(*probe, "--batch-size", "0", "--out", suite.root / "probe")
    a_file = suite.root / "a-file"
    a_file.write_text("keep")
    started = time.monotonic()
    existing = suite.medlama(*probe, "--out", a_file)
    seconds = time.monotonic() - started
    ok = suite.clear_error(zero, "batch size") and suite.clear_error(existing, str(a_file))
    outcomes.append((8, ok, f"{last_line(zero)} | {last_line(existing)} ({seconds:.0f}s)"))

    # 9. An unexpected file in the release folder.
    extra = suite.root / "release-extra"
    shutil.copytree(source, extra)
    shutil.copy(extra / "2021AA" / "may_treat_1000.csv", extra / "2021AA" / "may_cure_1000.csv")
    result = suite.medlama("build", "medlama", "--source", extra, "--no-verify", "--out", suite.root / "out-9")
    info = (suite.root / "out-9" / "build_info.json")
    listed = info.is_file() and "may_cure_1000.csv" in info.read_text(encoding="utf-8")
    ok = result.returncode == 0 and "may_cure_1000.csv" in result.stderr and listed
    outcomes.append((9, ok, f"exit {result.returncode}; warned on stderr: {'may_cure_1000.csv' in result.stderr}; "
                            f"listed in build_info.json: {listed}"))

    # 10. UCM metric with a rank of 10**30.
    import medlama.metrics

    ucm = medlama.metrics.load("ucm", keep_in_memory=True, cache_dir=str(suite.root / "ucm-cache"))
    try:
        ucm.compute(target_rank_before=[1], target_rank_after=[10**30], added_is_correct=[True])
        ok, message = False, "accepted"
    except ValueError as error:
        ok, message = "target_rank_after[0]" in str(error), str(error)
    except Exception as error:  # noqa: BLE001 - the OverflowError of the report
        ok, message = False, f"{type(error).__name__}: {error}"
    outcomes.append((10, ok, message[:150]))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="build from the whole MedLAMA release")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    with tempfile.TemporaryDirectory(prefix="medlama-issue12-") as scratch:
        outcomes = reproduce(Suite(Path(scratch), short=not args.full))
    for number, ok, detail in outcomes:
        print(f"defect {number:2}: {'fixed    ' if ok else 'NOT FIXED'} {detail}")
    print(f"issue 12: {sum(ok for _, ok, _ in outcomes)} of {len(outcomes)} reproductions give a clear error or "
          "correct output")
    return 0 if all(ok for _, ok, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
