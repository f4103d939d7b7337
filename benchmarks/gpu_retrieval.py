"""``gpu.py``'s retrieval part: the retrieval probe of the whole MedLAMA hard set with the bundled encoder, and
beside it, in the same process on the same inputs, what a researcher would run instead:

* ``reference`` preset: plain torch, the same computation written directly (the queries with the mask token cut
  at 50 tokens and the names at 25, batches of texts sorted by length, the last layer's ``[CLS]``, exact L2 by a
  matrix product and ``topk``; the model in fp16 on a GPU, as medlama encodes there);
* ``sentence-transformers`` preset: sentence-transformers' own ``encode`` and ``util.semantic_search``.

Each is timed best of ``--repeats`` (default 3), the runs interleaved; the peers' top-k lists are compared with
medlama's (the share of queries whose 10 names, in order, are the same; the top-1 share in the note)."""

from __future__ import annotations

from pathlib import Path

from gpu_common import FlopCounter, Peer, Row, parameters, peak_for, timed
from gpu_peers import best_of


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


def plain_torch(model_path: Path, device, batch_size: int):
    """The reference preset's computation in plain torch and transformers (module docstring): a function of
    queries, names and ``top_k`` giving the top name indices per query (the model loaded here, untimed, as
    medlama's prober is built before its timed run)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).to(device).eval()
    if device.type == "cuda":
        model = model.half()

    def encode(texts: list[str], max_length: int):
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = torch.empty((len(texts), model.config.hidden_size), device=device)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rows = order[start:start + batch_size]
                batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=max_length,
                                  return_tensors="pt").to(device)
                out[rows] = model(**batch).last_hidden_state[:, 0].float()
        return out

    def search(queries: list[str], names: list[str], top_k: int) -> list[list[int]]:
        q, n = encode(queries, 50), encode(names, 25)
        squared = (n * n).sum(1)
        top = []
        with torch.inference_mode():
            for start in range(0, len(q), 4096):
                scores = 2 * q[start:start + 4096] @ n.T - squared  # -||q - n||^2 + ||q||^2: the same order
                top += scores.topk(min(top_k, len(names)), dim=1).indices.tolist()
        return top

    return search


def sentence_transformers_search(model_path: Path, device, batch_size: int):
    """sentence-transformers' own retrieval: ``encode`` both sides, ``util.semantic_search`` (cosine); as
    :func:`plain_torch`, a function of queries, names and ``top_k`` (the model loaded here, untimed)."""
    from sentence_transformers import SentenceTransformer, util

    model = SentenceTransformer(str(model_path), device=str(device))

    def search(queries: list[str], names: list[str], top_k: int) -> list[list[int]]:
        q = model.encode(queries, batch_size=batch_size, convert_to_tensor=True)
        n = model.encode(names, batch_size=batch_size, convert_to_tensor=True)
        return [[hit["corpus_id"] for hit in hits] for hits in util.semantic_search(q, n, top_k=top_k)]

    return search


def agreement(ours: list[list[str]], theirs: list[list[int]], names: list[str], k: int) -> float:
    """The share of queries whose first ``k`` names, in order, are the same."""
    same = sum(list(a[:k]) == [names[j] for j in b[:k]] for a, b in zip(ours, theirs))
    return same / max(len(ours), 1)


def retrieval_part(args, device) -> list[Row]:
    from medlama.core.defaults import default_model_path
    from medlama.probers.query_set import QuerySet
    from medlama.probers.registry import make_prober

    per_relation = getattr(args, "per_relation", None) or (1 if args.small else None)
    queries = hard_set(args.source, per_relation, args.candidates if args.small else None)
    encoder_path = Path(args.encoder or default_model_path())
    label = "all-MiniLM-L6-v2 (bundled)" if args.encoder is None else f"{Path(args.encoder).name} (--encoder)"
    repeat = max(1, getattr(args, "repeats", 3))
    rows = []
    for preset in ("reference", "sentence-transformers"):
        settings = {"batch_size": args.retrieval_batch_size}
        prober = make_prober("retrieval", str(encoder_path), {**settings, **_preset_fields(preset)},
                             device=str(device))
        encoder = prober.encoder
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)  # the encoder takes every core on a CPU; --threads wins
        warm = QuerySet(queries.ids[:1], queries.relations[:1], queries.texts[:1], queries.gold[:1],
                        queries.candidates[:16], "warm-up")
        prober.rank_scored(warm)  # warm-up: the encoder, and faiss's import
        model = encoder.model if preset == "reference" else encoder.model[0].auto_model
        dtype = {"float16": "fp16", "bfloat16": "bf16"}.get(str(model.dtype).split(".")[-1], "fp32")
        counter = FlopCounter()
        # sentence-transformers calls the model's forward itself, past its hooks: count where the embeddings run
        counter.body(model if preset == "reference" else _CalledThrough(model, model.embeddings), model.config,
                     causal=False)
        seconds = timed(device, lambda: prober.rank_scored(queries, top_k=10))
        counter.close()
        inputs = queries.with_mask(encoder.mask_token)
        peer = "plain torch" if preset == "reference" else "sentence-transformers encode + util.semantic_search"
        run = (plain_torch if preset == "reference" else sentence_transformers_search)(
            encoder_path, device, args.retrieval_batch_size)
        best, results = best_of(device, {"medlama": lambda: prober.rank_scored(queries, top_k=10),
                                                 peer: lambda: run(inputs, queries.candidates, 10)}, repeat)
        ours = results["medlama"].names
        top = results[peer]
        note = f"top-1 agreement {100 * agreement(ours, top, queries.candidates, 1):.1f}%; best of {repeat}"
        rows.append(Row("retrieval", label, f"retrieval {preset}", parameters(model), dtype, str(device),
                        len(queries), len(queries.candidates), min(seconds, best["medlama"]), counter.tokens,
                        counter.flops, peak_for(device, dtype, args.peak_tflops),
                        [Peer(peer, best[peer], agreement(ours, top, queries.candidates, 10), note)]))
    return rows


def _preset_fields(preset: str) -> dict:
    """The fields of the retrieval preset ``preset`` (as ``--preset`` gives them)."""
    from dataclasses import asdict

    from medlama.probers.retrieval import PRESETS

    return {key: value for key, value in asdict(PRESETS[preset]).items() if key != "batch_size"}


class _CalledThrough:
    """``model`` as :meth:`FlopCounter.body` sees it, its hook on ``entry`` (a submodule every pass calls with
    ``input_ids``), for a caller that runs ``model.forward`` directly, past the model's own hooks."""

    def __init__(self, model, entry) -> None:
        self.model, self.entry = model, entry

    def named_parameters(self):
        return self.model.named_parameters()

    def register_forward_pre_hook(self, hook, *, with_kwargs: bool = False):
        return self.entry.register_forward_pre_hook(hook, with_kwargs=with_kwargs)
