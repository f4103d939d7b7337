"""Context variance on real text: MedLAMA triples against the released PubMed sentences, UCM of the bundled
encoder before and after Contrastive-Probe rewiring. Not a test: it takes several minutes.

1. MedLAMA is built from ``../shared/data/medlama`` (or ``--medlama DIR``, a built folder);
2. its triples (``--config full`` by default, all relations or ``--relations``) form the knowledge base, each
   relation's answer set its pool;
3. the 10 PubMed sentence files of ``../shared/data/elicit_corpora`` (each line a document) are indexed and
   searched (``medlama build context-variance`` with ``--corpus pubmed:text:FILE`` ...);
4. the bundled all-MiniLM-L6-v2 is rewired with the ``demo`` preset of ``medlama rewire --skip-short-lines``
   (its settings as the preset defines them, on 10k sentences sampled from the same PubMed files) into a temporary folder, or ``--rewired DIR`` is used;
5. both encoders rank every pool entity at each input (retrieval ranker: [CLS], L2), and the records go
   through the UCM and acc@k metric modules (``medlama ucm``).

Prints the paper's tables for both models, then a summary (triples with contexts, inputs, UCM_m / UCM_k,
with and without each sequence's first record, whose added entity is the centre itself; `medlama ucm`
leaves it out by default) and writes
``--out/cv_real_text.json`` (plus ``results.json`` and ``ucm.png`` of the UCM run).

    python benchmarks/cv_real_text.py                         # full set, all relations (~6-10 min on 2 cores)
    python benchmarks/cv_real_text.py --config hard --rewired out/rewired-demo --out out/cv-real
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from medlama.core.defaults import BUILD_INFO

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--medlama", type=Path, help="a built MedLAMA folder (default: build from --source)")
    parser.add_argument("--source", type=Path, default=SHARED / "medlama", help="the MedLAMA release")
    parser.add_argument("--corpora", type=Path, default=SHARED / "elicit_corpora", help="folder of the sentence files")
    parser.add_argument("--config", default="full", choices=["full", "hard"])
    parser.add_argument("--relations", nargs="+")
    parser.add_argument("--rewired", type=Path, help="a rewired model folder (default: rewire now, demo preset)")
    parser.add_argument("--max-docs", type=int, default=10)
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--work", type=Path, help="folder for the built data and models (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=Path("out/cv_real_text"))
    args = parser.parse_args()

    from medlama.datasets.context_variance import BuildSettings, CorpusSpec, build_context_variance
    from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama
    from medlama.core.defaults import default_model_path
    from medlama.core.display import print_table
    from medlama.ucm_eval.evaluation import evaluate_model
    from medlama.ucm_eval.rankers import RetrievalRanker
    from medlama.ucm_eval.report import print_tables, write_outputs
    from medlama.ucm_eval.scores import SHARES, ucm, ucm_k_macro
    from medlama.ucm_eval.sets import load_sets

    work = args.work or Path(tempfile.mkdtemp(prefix="cv-real-text-"))
    work.mkdir(parents=True, exist_ok=True)
    timings = {}
    started = time.perf_counter()
    medlama_dir = args.medlama
    if medlama_dir is None:
        from medlama.datasets.medlama_folder import write_medlama

        medlama_dir = work / "medlama"
        if not (medlama_dir / BUILD_INFO).is_file():
            write_medlama(medlama_dir, args.source, progress=False)
    timings["medlama"] = time.perf_counter() - started

    started = time.perf_counter()
    kb = knowledge_base_from_medlama(medlama_dir, args.config, relations=args.relations)
    files = sorted(p for p in args.corpora.glob("pubmed_sents_no_punkt_10k_*") if p.is_file())
    if len(files) != 10:
        print(f"expected 10 PubMed sentence files in {args.corpora}, found {len(files)}", file=sys.stderr)
        return 2
    specs = [CorpusSpec.make(files, "text", "pubmed", per="line")]
    sets_dir = work / "sets"
    build = build_context_variance(kb, specs, sets_dir, settings=BuildSettings(max_docs=args.max_docs),
                                   num_proc=args.num_proc, index_root=work / "indexes",
                                   origin=f"MedLAMA `{args.config}`", progress=False)
    timings["build_sets"] = time.perf_counter() - started
    stats = build.sources[0]

    started = time.perf_counter()
    rewired = args.rewired
    how = f"given ({rewired})"
    if rewired is None:
        from dataclasses import replace

        from medlama.trainers.config import RewireConfig
        from medlama.trainers.trainer import rewire

        rewired = work / "rewired-demo"
        # 86 lines of the 100k are too short to mask
        config = replace(RewireConfig.preset("demo"), skip_short_lines=True)
        result = rewire(files, rewired, config, disable_tqdm=True)
        used = result.record["config"]
        how = (f"rewired here with `medlama rewire --preset demo --skip-short-lines` on the 10 PubMed files: "
               f"{result.global_step} steps, batch {used['batch_size']}, lr {used['learning_rate']}, "
               f"tau {used['temperature']}, max length {used['max_length']}, {used['max_sentences']} sentences "
               f"sampled, seed {used['seed']}; {result.train_seconds:.0f} s of training")
    timings["rewire"] = time.perf_counter() - started

    sets = load_sets(sets_dir)
    models = [("bundled (base)", str(default_model_path())), ("bundled (rewired)", str(rewired))]
    results = []
    for label, path in models:
        started = time.perf_counter()
        # All records, S1 included, so that both variants can be reported (the default leaves S1 out).
        results.append(evaluate_model(RetrievalRanker(path), sets, label=label, keep_records=True,
                                      skip_first_segment=False, progress=False))
        timings[f"ucm {label}"] = time.perf_counter() - started
    print_tables(results, (1, 5))
    write_outputs(results, sets, args.out, (1, 5))

    summary = []
    for r in results:
        later = {side: [x for x in r.records if x["negative"] == (side == "negative") and x["k"] > 1]
                 for side in ("target", "negative")}
        without_first = {side: ucm(records) for side, records in later.items()}
        summary.append({
            "model": r.label, "settings": r.settings,
            "ucm_m": {side: _shares(getattr(r, side)) for side in ("target", "negative")},
            "ucm_k_macro": r.ucm_k_macro,
            "ucm_m_without_first_segment": {side: _shares(v) for side, v in without_first.items()},
            "ucm_k_macro_without_first_segment": {side: ucm_k_macro(v) for side, v in without_first.items()},
            "acc": {when: {k: r.accuracy["target"][when][f"acc@{k}"] for k in (1, 5)}
                    for when in ("without_context", "with_context")},
            "records": r.num_records, "records_truncated": r.num_records_truncated, "seconds": r.seconds})
    rows = []
    for s in summary:
        for variant, key in (("with S1 records", "ucm_m"), ("without S1 records: default", "ucm_m_without_first_segment")):
            t, n = s[key]["target"], s[key]["negative"]
            rows.append([f"{s['model']} ({variant})", *(_f(t.get(x)) for x in SHARES), t.get("n", 0),
                         *(_f(n.get(x)) for x in SHARES), n.get("n", 0)])
    print_table("UCM_m of the bundled encoder on PubMed contexts of MedLAMA triples",
                ["model", "U", "C", "M", "records", "neg U", "neg C", "neg M", "neg records"], rows,
                caption="records: those whose added entity is correct (the UCM denominator)")
    negative_sequences = sum(v for k, v in stats.sequences.items() if k.endswith("_negative"))
    print(f"knowledge base: MedLAMA {args.config}, {len(kb):,} triples ({len({t.relation for t in kb})} relations); "
          f"corpus: {stats.documents:,} PubMed sentences in 10 files")
    print(f"triples with contexts: {stats.triples_with_context:,} of {stats.triples:,} "
          f"({stats.documents_retrieved:,} documents); sequences: {sum(stats.sequences.values()):,} "
          f"({negative_sequences:,} negative-target); inputs: {stats.inputs:,}; records: {stats.records:,}")
    print(f"rewired model: {how}")
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    payload = {"config": args.config, "relations": args.relations, "triples": len(kb),
               "corpus_documents": stats.documents, "build": {k: v for k, v in stats.__dict__.items()},
               "rewired_model": how, "models": summary, "seconds": timings, "work": str(work)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cv_real_text.json").write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'cv_real_text.json'}, {args.out / 'results.json'}, {args.out / 'ucm.png'}")
    return 0


def _shares(result) -> dict:
    if not result:
        return {"understand": None, "confuse": None, "misunderstand": None, "n": 0}
    return {"understand": result["understand"], "confuse": result["confuse"],
            "misunderstand": result["misunderstand"], "n": result["num_records_correct"]}


def _f(value) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
