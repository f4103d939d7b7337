"""Wall time of a ``--templates`` probe (3 templates by default) and how many times it loads each model: what the
one load per model of a templates run saves (before it, each template loaded the model again).

The 6-query MedLAMA-shaped folder of the tests (``tests/helpers/cv_inputs.py``) and a random BERT saved like a
user's checkpoint (``tests/helpers/tiny_bert.py``: hidden 32, 2 layers, the bundled encoder's 30k-token
vocabulary; ``--layers`` deepens it), probed by ``medlama.probe`` with a template file of ``--templates``
templates per relation, in memory (``medlama.probe``) and into an output folder (``medlama probe --out``, in
this process, its tables silenced: the resume shards kept). Loads are
counted at ``PreTrainedModel.from_pretrained``. Each figure is the median of ``--repeats`` runs after one
warm-up run (tokenizers and the data read once); nothing is downloaded.

    python benchmarks/bench_template_loads.py --threads 1
    python benchmarks/bench_template_loads.py --threads 1 --method mask-average --templates 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "helpers"))  # the tests' data folder and tiny BERT (one way to make them)

WORDS = ["[X] may have finding [Y] .", "[X] shows [Y] .", "A sign of [X] is [Y] .", "[X] presents with [Y] .",
         "In [X] one finds [Y] ."]
TREATS = ["[X] may treat [Y] .", "[X] treats [Y] .", "[Y] is treated with [X] .", "[X] is given for [Y] .",
          "[X] helps against [Y] ."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", type=int, default=3, choices=range(1, len(WORDS) + 1))
    parser.add_argument("--method", default="retrieval", choices=["retrieval", "mask-average"])
    parser.add_argument("--layers", type=int, default=2, help="layers of the random BERT")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's; an encoder loaded on the CPU sets all the CPUs)")
    args = parser.parse_args()

    import torch
    from transformers import PreTrainedModel

    import cv_inputs
    import medlama
    from medlama.cli import main as medlama_cli
    from tiny_bert import save_tiny_bert

    if args.threads:
        torch.set_num_threads(args.threads)
    loads, load = [], PreTrainedModel.from_pretrained.__func__

    def counted(cls, name, *args, **kwargs):  # every model load ends here (the Auto classes too)
        loads.append(name)
        return load(cls, name, *args, **kwargs)

    PreTrainedModel.from_pretrained = classmethod(counted)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = cv_inputs.write_probe_folder(root / "medlama")
        model = save_tiny_bert(root / "model", mlm=args.method != "retrieval", layers=args.layers)
        file = root / "templates.csv"
        file.write_text("relation,template\n" + "".join(
            f"{relation},{text}\n" for relation, texts in ((cv_inputs.FINDING, WORDS), (cv_inputs.TREAT, TREATS))
            for text in texts[:args.templates]), encoding="utf-8")
        rows = []
        for where in ("in memory", "into --out"):
            times, counts = [], []
            for repeat in range(args.repeats + 1):
                del loads[:]
                start = time.perf_counter()
                if where == "in memory":
                    medlama.probe(str(model), data, config="full", method=args.method, templates=file)
                else:
                    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
                        status = medlama_cli(["probe", "--data", str(data), "--config", "full", "--model", str(model),
                                              "--method", args.method, "--templates", str(file), "--out",
                                              str(root / f"out-{repeat}")])
                    assert status == 0, status
                if repeat:  # the first run warms up
                    times.append(time.perf_counter() - start)
                    counts.append(len(loads))
            rows.append((where, statistics.median(times), min(times), max(times), counts[0]))
    print(f"{args.templates} templates, {args.method}, random BERT ({args.layers} layers), 6 queries, "
          f"torch threads {torch.get_num_threads()}, median of {args.repeats}")
    print(f"{'run':<12} {'median s':>9} {'min s':>7} {'max s':>7} {'model loads':>12}")
    for where, median, low, high, count in rows:
        print(f"{where:<12} {median:9.3f} {low:7.3f} {high:7.3f} {count:12d}")


if __name__ == "__main__":
    main()
