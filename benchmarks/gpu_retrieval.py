"""``gpu.py``'s retrieval part: the retrieval probe of the whole MedLAMA hard set with the bundled encoder."""

from __future__ import annotations

from pathlib import Path

from gpu_common import FlopCounter, Row, parameters, peak_for, timed


def hard_set(source: Path, per_relation: int | None, pool: int | None):
    """The MedLAMA hard set read from the release (as ``medlama build`` derives it: the released hard files'
    rows, the human prompts, every head and answer name as the pool); with ``per_relation`` only the first
    queries of each relation, with ``pool`` only the first names of the pool and the gold answers."""
    from medlama.datasets.prompts import fill_prompt
    from medlama.loaders import medlama_release as release
    from medlama.probers.query_set import QuerySet

    ids, relations, texts, gold, every = [], [], [], [], set()
    with release.open_release(source) as opened:
        prompts = release.read_prompts(opened.root / "prompts.csv")
        for relation in release.RELATIONS:
            rows = release.read_relation_file(opened.hard_file(relation), relation)
            every.update(name for row in rows for name in (row.head_name, *row.tail_names))
            for row in rows[:per_relation]:
                ids.append(f"{relation}-{row.row:04d}")
                relations.append(relation)
                texts.append(fill_prompt(prompts[relation].human_prompt, row.head_name))
                gold.append(list(row.tail_names))
    names = sorted(every)
    if pool is not None:
        names = sorted(set(names[:pool]) | {name for answers in gold for name in answers})
    return QuerySet(ids, relations, texts, gold, names, "hard")


def retrieval_part(args, device) -> list[Row]:
    from medlama.core.defaults import default_model_path
    from medlama.probers.query_set import QuerySet
    from medlama.probers.registry import make_prober

    queries = hard_set(args.source, 1 if args.small else None, args.candidates if args.small else None)
    encoder_path = args.encoder or default_model_path()
    prober = make_prober("retrieval", str(encoder_path), {"batch_size": args.retrieval_batch_size},
                         device=str(device))
    encoder = prober.encoder
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)  # the encoder takes every core on a CPU; --threads wins
    warm = QuerySet(queries.ids[:1], queries.relations[:1], queries.texts[:1], queries.gold[:1],
                    queries.candidates[:16], "warm-up")
    prober.rank_scored(warm)  # warm-up: the encoder, and faiss's import
    dtype = {"float16": "fp16", "bfloat16": "bf16"}.get(str(encoder.model.dtype).split(".")[-1], "fp32")
    counter = FlopCounter()
    counter.body(encoder.model, encoder.model.config, causal=False)
    seconds = timed(device, lambda: prober.rank_scored(queries, top_k=10))
    counter.close()
    label = "all-MiniLM-L6-v2 (bundled)" if args.encoder is None else f"{Path(args.encoder).name} (--encoder)"
    return [Row("retrieval", label, "retrieval reference", parameters(encoder.model), dtype,
                str(device), len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                peak_for(device, dtype, args.peak_tflops))]
