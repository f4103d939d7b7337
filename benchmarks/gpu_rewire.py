"""``gpu.py``'s rewire part: ``medlama rewire``'s training steps per second (the real pipeline,
:func:`medlama.trainers.trainer.rewire`, ClozeInfoNCE over the 2N texts of a batch) against sentence-transformers'
own ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (its in-batch-negatives InfoNCE) at the
same batch size, on the same cloze pairs, with the same model (:func:`medlama.trainers.model.build_rewire_model`:
the bundled all-MiniLM-L6-v2, ``[CLS]`` pooling, dropout 0.1) and precision. The pairs come from synthetic
sentences over the drug-like names (no corpus needed). Timed: each step, ``on_step_begin`` to ``on_step_end``,
the first step (warm-up) left out, for both, the median step times the steps counted (other work on a shared
machine only slows a step down), the two alternated 3 times, best of each; checkpoint writing falls outside a step. FLOPs: 3 x the forward
passes' (forward and backward), counted from the shapes as the other parts count them."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from gpu_common import FlopCounter, Peer, Row, parameters, peak_for
from gpu_models import synthetic_queries

from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.losses import MultipleNegativesRankingLoss
from transformers import TrainerCallback

from medlama.trainers.cloze import build_cloze_dataset
from medlama.trainers.config import RewireConfig
from medlama.trainers.devices import resolve_precision
from medlama.trainers.model import build_rewire_model
from medlama.trainers.trainer import rewire


def sentences(count: int, seed: int = 0) -> list[str]:
    """Sentences of 12 to 30 words over the synthetic names and a few clinical words."""
    _, corpus = synthetic_queries(8, 400)
    names = corpus[8:]
    words = ("may treat", "is used for", "reduces", "in adults with", "and", "was given to patients with",
             "after", "lowers the risk of", "in children", "compared with")
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = [rng.choice(names)]
        while len(" ".join(parts).split()) < rng.randint(12, 30):
            parts += [rng.choice(words), rng.choice(names)]
        out.append(" ".join(parts) + " .")
    return out


def step_timer():
    class StepTimes(TrainerCallback):
        """Wall seconds of each training step (the device synchronised at both ends)."""

        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._start = 0.0

        @staticmethod
        def _sync() -> None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()

        def on_step_begin(self, args, state, control, **kwargs):
            self._sync()
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self._sync()
            self.seconds.append(time.perf_counter() - self._start)

    return StepTimes()


def peer_steps(build, config, precision: str, out: Path) -> list[float]:
    """sentence-transformers' trainer and MultipleNegativesRankingLoss on ``build``'s pairs: the seconds of each
    step after the first."""
    model, _ = build_rewire_model(config.model, layer=config.layer, dropout=config.dropout,
                                  max_length=config.max_length)
    cuda = torch.cuda.is_available()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out), use_cpu=not cuda, max_steps=config.steps, per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate, weight_decay=config.weight_decay, lr_scheduler_type="linear",
        seed=config.seed, save_strategy="no", logging_steps=config.steps, bf16=precision == "bf16",
        fp16=precision == "fp16", batch_sampler="no_duplicates", dataloader_pin_memory=cuda, report_to=[],
        disable_tqdm=True)
    timer = step_timer()
    trainer = SentenceTransformerTrainer(model=model, args=args, loss=MultipleNegativesRankingLoss(model),
                                         train_dataset=build.dataset.select_columns(["query", "answer"]),
                                         callbacks=[timer])
    trainer.train()
    return timer.seconds[1:]


def rewire_part(args, device, dtype: str) -> list[Row]:
    batch, length, steps = (16, 32, 4) if args.small else (192, 48, 20)
    precision = resolve_precision("auto" if device.type == "cuda" else "fp32")
    encoder = getattr(args, "encoder", None)  # --encoder: the same architecture elsewhere (random weights time alike)
    config = RewireConfig.preset("paper", steps=steps, batch_size=batch, max_length=length, save_steps=steps,
                                 logging_steps=steps, precision=precision, max_sentences=None,
                                 model=str(encoder) if encoder else None)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences(batch * steps * 2)) + "\n")
        counted: list[FlopCounter] = []
        counted_model: list = []

        class CountFlops(TrainerCallback):  # hooks on the encoder once the trainer holds it (first round only)
            def on_train_begin(self, args_, state, control, model=None, **kwargs):
                counter = FlopCounter()
                encoder = model[0].auto_model
                counter.body(encoder, encoder.config, causal=False)
                # sentence-transformers calls the encoder's forward method, not the module (no hooks run):
                # the count moves to its embeddings, called as a module with the same input_ids
                handle = counter.handles.pop()
                hook = encoder._forward_pre_hooks[handle.id]
                handle.remove()
                counter.handles.append(encoder.embeddings.register_forward_pre_hook(hook, with_kwargs=True))
                counted.append(counter)
                counted_model.append(model)

        ours, theirs, build, steps_seen = [], [], None, 0
        repeats = max(1, args.repeats)
        for round_ in range(repeats):  # medlama's run and the peer's alternate, so both meet the same load
            timer = step_timer()
            result = rewire(corpus, Path(tmp) / f"out{round_}", config, disable_tqdm=True,
                            callbacks=[timer] + ([CountFlops()] if round_ == 0 else []))
            if round_ == 0:
                counted[0].close()
                steps_seen = len(timer.seconds)
                build = build_cloze_dataset(corpus, mask_token=result.record["mask_token"],
                                            mask_ratio=config.mask_ratio, seed=config.seed,
                                            skip_short_lines=config.skip_short_lines)
            ours.append(statistics.median(timer.seconds[1:]))
            theirs.append(statistics.median(peer_steps(build, config, precision, Path(tmp) / f"peer{round_}")))
        timed_steps, share = steps_seen - 1, (steps_seen - 1) / max(1, steps_seen)
        # the median step (the best round's), times the steps: a step slowed by other work does not count
        seconds, peer = timed_steps * min(ours), timed_steps * min(theirs)
        label = "all-MiniLM-L6-v2 (bundled)" if not encoder else f"{Path(encoder).name} (--encoder)"
        return [Row("rewire", label, f"rewire {batch} pairs x {length} tokens",
                    parameters(counted_model[0]), precision, str(device), timed_steps * batch, 0, seconds,
                    int(counted[0].tokens * share), 3 * counted[0].flops * share,
                    peak_for(device, precision, args.peak_tflops),
                    [Peer("sentence-transformers trainer + MultipleNegativesRankingLoss", peer,
                          note=f"{timed_steps} steps each, median step x steps, best of {repeats} alternated runs "
                               f"(medlama {min(ours):.3f} s, peer {min(theirs):.3f} s a step); queries = pairs "
                               "trained")])]
