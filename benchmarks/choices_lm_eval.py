"""Multiple choice (``hard_mc``): ``medlama probe --method causal-likelihood`` against lm-evaluation-harness running
the task ``medlama export lm-eval --config hard_mc`` writes, both in one process on the same queries, choices and
model; acc@1 of both printed (they agree: lm-eval's ``acc`` is medlama's acc@1, see
``tests/integrations/test_lm_eval_choices.py``).

The model is a randomly initialised GPT-2 of one of ``gpu_models.CAUSAL``'s shapes (``--model gpt2-tiny``, default,
or ``gpt2``: GPT-2 small's 124M) with a byte-level BPE tokenizer trained here on the queries and choices (nothing
is downloaded; random weights: the figures measure the work, not knowledge). Per relation the first ``--queries``
queries are run (lm-eval's ``samples``). Both sides use ``--batch-size`` (lm-eval's ``batch_size``; medlama's
``LikelihoodSettings.batch_size``) and fp32. Times: the least of ``--repeats`` rounds (medlama then lm-eval in each
round), the process's CPU seconds with ``--clock cpu`` (steadier on a shared machine), else wall seconds; task
loading is inside lm-eval's time, as a user running ``lm_eval`` pays it.

    python benchmarks/choices_lm_eval.py --data /tmp/medlama --threads 1 --repeats 3
    python benchmarks/choices_lm_eval.py --data /tmp/medlama --model gpt2 --queries 4 --threads 1
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread each side: CPU seconds compare

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_models, bench_causal beside this file
from gpu_models import CAUSAL  # noqa: E402 - after the path it needs
from gpu_peers import best_of  # noqa: E402 - the one best-of timer of the peer benchmarks

RELATIONS = ("may_treat", "occurs_after", "has_physiologic_effect", "may_prevent")


def build_model(folder: Path, shape: str, corpus: list[str]) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from bench_causal import bpe_tokenizer

    size = CAUSAL[shape]
    tokenizer = bpe_tokenizer(corpus)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=size["vocab"] or len(tokenizer), n_positions=1024, n_embd=size["hidden"],
                               n_layer=size["layers"], n_head=size["heads"], n_inner=size["inner"], bos_token_id=0,
                               eos_token_id=0)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built MedLAMA folder (built here from --source "
                                                                 "when it has no build_info.json)")
    parser.add_argument("--source", type=Path, default=Path("../shared/data/medlama"))
    parser.add_argument("--model", choices=[name for name in CAUSAL if name.startswith("gpt2")], default="gpt2-tiny")
    parser.add_argument("--relations", default=",".join(RELATIONS))
    parser.add_argument("--queries", type=int, default=50, help="first queries of each relation")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    import torch
    import transformers

    import lm_eval
    from lm_eval.tasks import TaskManager

    import medlama
    from medlama.cli import main as medlama_main
    from medlama.core.defaults import BUILD_INFO
    from medlama.probers.causal.prober import LikelihoodSettings
    from medlama.runs.queries import load_medlama_queries

    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    if not (args.data / BUILD_INFO).exists():
        from medlama.datasets.medlama_folder import write_medlama

        write_medlama(args.data, args.source, progress=False)
    relations = [r for r in args.relations.split(",") if r]
    queries = load_medlama_queries(args.data, "hard_mc", relations=relations).limit_per_relation(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        tasks, model = Path(tmp) / "tasks", Path(tmp) / "model"
        assert medlama_main(["export", "lm-eval", "--data", str(args.data), "--out", str(tasks), "--config",
                             "hard_mc", "--relations", *relations]) == 0
        corpus = [t.replace("[Y]", c) for t, row in zip(queries.texts, queries.choices) for c in row]
        build_model(model, args.model, corpus)
        settings = LikelihoodSettings(batch_size=args.batch_size)
        samples = {f"medlama_hard_mc_{r}": list(range(queries.relations.count(r))) for r in relations}

        def ours():
            return medlama.probe(str(model), data=queries, method="causal-likelihood", settings=settings)

        def theirs():
            return lm_eval.simple_evaluate(
                model="hf", model_args=f"pretrained={model},dtype=float32", tasks=["medlama_hard_mc"],
                task_manager=TaskManager(include_path=str(tasks), include_defaults=False), samples=samples,
                batch_size=args.batch_size, device="cpu")

        best, out = best_of(torch.device("cpu"), {"medlama": ours, "lm-eval": theirs}, args.repeats, clock=args.clock)
        acc, their_acc = out["medlama"].acc(1, "micro"), out["lm-eval"]["results"]["medlama_hard_mc"]["acc,none"]
    print(f"hard_mc: {len(queries)} queries x {len(queries.choices[0])} choices ({', '.join(relations)}), "
          f"GPT-2 shape {args.model}, fp32, batch {args.batch_size}, {torch.get_num_threads()} torch thread(s); "
          f"torch {torch.__version__}, transformers {transformers.__version__}, lm-eval {lm_eval.__version__}")
    print(f"medlama probe: {best['medlama']:.2f} {args.clock} s (acc@1 {acc:.4f}); lm-eval simple_evaluate: "
          f"{best['lm-eval']:.2f} {args.clock} s (acc {their_acc:.4f}); medlama/lm-eval "
          f"{best['medlama'] / best['lm-eval']:.2f}x (best of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
