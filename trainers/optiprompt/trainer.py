"""OptiPrompt training of one relation (Zhong et al. 2021, as BioLAMA's ``run_optiprompt.py`` runs it).

Only the prompt's ``[Vi]`` vectors train (:mod:`medlama.probers.learned_prompts`); the masked LM is frozen.

* Examples: one per (subject, object label) of the relation's ``train`` rows (aliases are not trained on),
  shuffled once with ``seed`` and batched in that order every epoch, as BioLAMA's data loader.
* Input: the learned template with the subject and as many masks as the object has tokens (the object's
  tokens as the slot reads them, as mask predict matches candidates); loss: the masked-LM cross-entropy of
  the object's tokens at its masks, the mean over every mask of the batch. The model runs in training mode
  (its dropout on), as BioLAMA's.
* Optimiser: BioLAMA's ``AdamW(correct_bias=False)`` (transformers' AdamW with its defaults: betas 0.9 /
  0.999, eps 1e-6, no weight decay, no bias correction), learning rate ``lr`` warmed up linearly over the
  first ``warmup`` share of the steps (``int(steps * warmup)``) then decayed linearly to 0, as
  ``get_linear_schedule_with_warmup`` (the first step at rate 0 when there is a warm-up).
* Selection: the prompt is decoded on the relation's ``dev`` queries before the first epoch and after each
  one, with the decoding settings of the test (mask predict); the epoch with the best dev acc@1 is kept (a
  later epoch only when strictly better).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field, replace

from medlama.core.errors import MedlamaInputError
from medlama.core.progress import bar
from medlama.core.settings import Checked, setting
from medlama.datasets.declared.biolama import BIOLAMA
from medlama.probers.learned_prompts import INITS, LearnedPrompt, initial_template, vector_count
from medlama.probers.mask_predict import MaskPredictProber
from medlama.probers.query_set import QuerySet
from medlama.runs.workflow import probe

#: transformers' AdamW defaults, which BioLAMA's optimiser keeps.
BETAS, EPS = (0.9, 0.999), 1e-6


@dataclass(frozen=True)
class OptiPromptSettings(Checked):
    """How each relation's prompt is trained (BioLAMA's defaults)."""

    init: str = setting("manual", choices=INITS, help="manual: one vector per token of the manual template, "
                                                      "starting from its embedding; random: [X] [V1]..[Vn] [Y] . "
                                                      "with random vectors")
    prompt_tokens: int = setting(5, min=1, max=64, metavar="N", help="vectors of the random init")
    epochs: int = setting(10, min=0, metavar="N", help="training epochs (0: the initial prompt, kept as it is)")
    lr: float = setting(3e-3, min=0, help="peak learning rate")
    warmup: float = setting(0.1, min=0, max=1, help="share of the steps over which the learning rate warms up")
    batch_size: int = setting(16, min=1, metavar="N", help="training examples per step (and dev queries decoded "
                                                           "together)")
    seed: int = setting(0, min=0, max=2**64 - 1, help="seed of the example order, the dropout and the random init "
                                                     "(0 to 2^64-1, what torch takes)")


@dataclass
class TrainedPrompt:
    """One relation's outcome: the kept prompt, the dev acc@1 curve (epoch 0 = before training), the epoch
    kept, the manual prompt's dev acc@1, and what the training saw."""

    prompt: LearnedPrompt
    curve: list[float]
    best_epoch: int
    manual_dev: float
    examples: int
    steps: int
    seconds: float
    losses: list[float] = field(default_factory=list)


def examples_of(rows: dict, relation: str) -> list[tuple[str, str]]:
    """``(query, object label)`` per object label of each train row, in row order."""
    out = [(query, label) for query, labels in zip(rows["query"], rows["obj_labels"]) for label in labels
           if label.strip()]
    if not out:
        raise MedlamaInputError(f"relation {relation!r}: its train split has no (subject, object) pair to train on")
    return out


def linear_rate(step: int, total: int, warmup: int) -> float:
    """The learning-rate factor at optimiser step ``step`` (0-based), as get_linear_schedule_with_warmup."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


#: Rows (queries x beam entries) per forward pass of a dev decoding, at most: the dev set is decoded as one block
#: so that every round of it is a few wide passes, not one narrow pass per ``batch_size`` queries (on a GPU a
#: narrow pass costs its launch latency, not its arithmetic); the log-probability budget
#: (:func:`medlama.probers.mlm.logprob_elements`) still caps a pass.
DEV_ROWS_PER_PASS = 1024


def dev_accuracy(prober: MaskPredictProber, queries: QuerySet, prompt: LearnedPrompt | None) -> float:
    """acc@1 of ``queries`` decoded with ``prompt`` (``None``: the manual prompt), scored as BioLAMA; every query
    decoded in one block (:data:`DEV_ROWS_PER_PASS`): a query's answers do not depend on the others decoded
    beside it."""
    settings, rows = prober.settings_, prober.lm.batch_size
    prober.use_prompts(None if prompt is None else {prompt.relation: prompt})
    prober.settings_ = replace(settings, batch_size=max(1, len(queries)))
    prober.lm.batch_size = max(rows, DEV_ROWS_PER_PASS)
    try:
        return probe(prober, queries, top_k=1, ks=(1,), match=BIOLAMA.match).acc(1)
    finally:
        prober.settings_, prober.lm.batch_size = settings, rows
        prober.use_prompts(None)


def _batches(prober: MaskPredictProber, prompt: LearnedPrompt, examples: list[tuple[str, str]], size: int):
    """Tensors (ids, attention mask, mask positions, gold ids, which positions count) of each batch."""
    import torch  # torch only when a model trains

    lm = prober.lm
    rows = []
    for query, label in examples:
        split = prompt.split(lm, query)
        gold = lm.candidate_ids([label], split.space_before)[0]
        if not gold:
            continue
        ids, start = lm.template(split, len(gold))
        rows.append((ids, list(range(start, start + len(gold))), gold))
    out = []
    for at in range(0, len(rows), size):
        chunk = rows[at:at + size]
        length, width = max(len(r[0]) for r in chunk), max(len(r[2]) for r in chunk)
        ids = torch.full((len(chunk), length), lm.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), length), dtype=torch.long)
        where = torch.zeros((len(chunk), width), dtype=torch.long)
        gold = torch.zeros((len(chunk), width), dtype=torch.long)
        counts = torch.zeros((len(chunk), width), dtype=torch.bool)
        for r, (row, positions, tokens) in enumerate(chunk):
            ids[r, :len(row)], mask[r, :len(row)] = torch.tensor(row), 1
            where[r] = torch.tensor(positions + [positions[-1]] * (width - len(positions)))
            gold[r, :len(tokens)], counts[r, :len(tokens)] = torch.tensor(tokens), True
        out.append(tuple(t.to(lm.device) for t in (ids, mask, where, gold, counts)))
    return out


def train_relation(prober: MaskPredictProber, relation: str, manual: str, train_rows: dict, dev: QuerySet,
                   settings: OptiPromptSettings, *, progress: bool = True) -> TrainedPrompt:
    """Train ``relation``'s prompt on ``train_rows`` (its train split's ``query`` and ``obj_labels``), keep the
    epoch with the best acc@1 on ``dev`` (see the module docstring)."""
    import torch  # torch only when a model trains

    started = time.perf_counter()
    lm = prober.lm
    template, sources = initial_template(lm, manual, settings.init, settings.prompt_tokens)
    embeddings = lm.model.get_input_embeddings().weight
    if settings.init == "manual":
        start = embeddings.detach()[torch.tensor(sources, device=embeddings.device)].float().clone()
    else:
        generator = torch.Generator().manual_seed(settings.seed)
        scale = float(getattr(lm.model.config, "initializer_range", 0.02))
        start = torch.randn((vector_count(template), embeddings.shape[1]), generator=generator) * scale
    vectors = start.to(lm.device).requires_grad_(True)
    examples = examples_of(train_rows, relation)
    random.Random(settings.seed).shuffle(examples)
    prompt = LearnedPrompt(relation, manual, template, vectors)
    batches = _batches(prober, prompt, examples, settings.batch_size)
    total = len(batches) * settings.epochs
    warmup = int(total * settings.warmup)

    def kept() -> LearnedPrompt:
        return LearnedPrompt(relation, manual, template, vectors.detach().cpu().clone())

    best, curve = kept(), [dev_accuracy(prober, dev, kept())]
    # the manual init decodes exactly as the manual prompt (tests/trainers/test_optiprompt.py checks it)
    manual_dev = curve[0] if settings.init == "manual" else dev_accuracy(prober, dev, None)
    best_epoch, losses, step = 0, [], 0
    torch.manual_seed(settings.seed)
    moment, second = torch.zeros_like(vectors), torch.zeros_like(vectors)
    for parameter in lm.model.parameters():
        parameter.requires_grad_(False)
    progress_bar = bar(total=total, desc=f"optiprompt {relation}" if progress else None, unit="step")
    try:
        for epoch in range(1, settings.epochs + 1):
            lm.model.train()
            lm.vectors = vectors
            epoch_loss = 0.0
            for ids, mask, where, gold, counts in batches:
                logits = lm.logits_at(ids, mask, where).float()
                loss = torch.nn.functional.cross_entropy(logits[counts], gold[counts])
                (grad,) = torch.autograd.grad(loss, vectors)
                rate = settings.lr * linear_rate(step, total, warmup)
                with torch.no_grad():  # AdamW without bias correction nor weight decay (BioLAMA's)
                    moment.mul_(BETAS[0]).add_(grad, alpha=1 - BETAS[0])
                    second.mul_(BETAS[1]).addcmul_(grad, grad, value=1 - BETAS[1])
                    vectors.addcdiv_(moment, second.sqrt().add_(EPS), value=-rate)
                step += 1
                epoch_loss += loss.item()
                progress_bar.update(1)
            lm.model.eval()
            lm.vectors = None
            losses.append(epoch_loss / max(1, len(batches)))
            if not math.isfinite(losses[-1]):
                raise MedlamaInputError(f"relation {relation!r}: the training loss is not finite at epoch {epoch} "
                                        f"(lr {settings.lr}); try a lower --lr")
            curve.append(dev_accuracy(prober, dev, kept()))
            if curve[-1] > curve[best_epoch]:
                best, best_epoch = kept(), epoch
    finally:
        progress_bar.close()
        lm.model.eval()
        lm.vectors = None
    return TrainedPrompt(best, curve, best_epoch, manual_dev, len(examples), total,
                         round(time.perf_counter() - started, 3), losses)
