"""What every part of ``gpu.py`` shares: the row it reports (with the peers measured beside it in the same run),
the FLOP count from the forward passes' shapes, timing, the assumed peaks, and the table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

#: Dense peak TFLOP/s per dtype (vendor datasheets, no sparsity); the first name found in the device's wins.
PEAKS = (
    ("H200", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),
    ("H100 PCIe", {"bf16": 756.5, "fp16": 756.5, "fp32": 51.2}),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}),  # SXM (HBM3)
    ("A100", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.1, "fp16": 362.1, "fp32": 91.6}),
)


@dataclass
class Peer:
    """What a user would run instead, timed in the same process on the same inputs as the row it belongs to.

    ``agreement``: the share of queries whose top-k list (names, in order) equals medlama's, where the peer ranks;
    ``None`` where it only scores (then the row says what was compared in ``note``)."""

    name: str
    seconds: float
    agreement: float | None = None
    note: str = ""


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
    peers: list[Peer] = field(default_factory=list)

    @property
    def figures(self) -> dict:
        achieved = self.flops / self.seconds / 1e12
        return {"queries/s": self.queries / self.seconds, "tokens/s": self.tokens / self.seconds,
                "TFLOP/s": achieved, "MFU": achieved / self.peak_tflops if self.peak_tflops else None,
                "floor s": self.flops / (self.peak_tflops * 1e12) if self.peak_tflops else None}


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
            cache = kwargs.get("cache", kwargs.get("past_key_values"))  # by its name in either transformers
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

    name = torch.cuda.get_device_name(device)
    return next((table[dtype] for key, table in PEAKS if key in name), None)


def parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())



def ratio(row: Row, peer: Peer) -> float:
    """medlama's time over the peer's (below 1: medlama is faster)."""
    return row.seconds / peer.seconds


def table(rows: list[Row]) -> str:
    """One line per row, then one per peer measured beside it: its time, medlama's time over it, and the share of
    queries whose top-k lists agree; last, the arithmetic floor (the row's FLOPs at the assumed peak)."""
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
        for peer in row.peers:
            agree = f"top-k agreement {100 * peer.agreement:.1f}%" if peer.agreement is not None else ""
            lines.append(f"{'':<10}  peer {peer.name}: {peer.seconds:.2f} s; medlama/peer {ratio(row, peer):.2f}x"
                         + (f"; {agree}" if agree else "") + (f"; {peer.note}" if peer.note else ""))
        if f["floor s"] is not None:
            lines.append(f"{'':<10}  arithmetic floor at the assumed peak: {f['floor s']:.3g} s")
    return "\n".join(lines)
