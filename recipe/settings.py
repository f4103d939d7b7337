"""What ``medlama recipe`` is told besides the data, the probe's retrieval settings and the output: the encoder,
the corpora to rewire on and how the rewiring runs (its flags are made from these fields)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.core.errors import MedlamaInputError
from medlama.core.settings import check, setting
from medlama.trainers.config import PRESETS, QUICK_PRESET

#: How the probed checkpoint of each rewiring is chosen: ``last``, the paper's rule (section 5.5: "we currently
#: use checkpoints after contrastive tuning for a fixed number of steps (200, specifically)"), or ``heldout``,
#: the checkpoint whose held-out cloze self-retrieval acc@10 is best (the paper leaves the validation set open;
#: this one uses no probing data).
CHECKPOINT_CHOICES = ("last", "heldout")


@dataclass(frozen=True, kw_only=True)
class RecipeSettings:
    """The encoder, the rewiring corpora (one rewired model each), the rewiring preset and what replaces its
    values, and the extra probes (checkpoints, held-out cloze). Bounds are checked where they are used (the
    rewiring's by :class:`~medlama.trainers.config.RewireConfig`), so each message names its flag."""

    model: str | None = setting(None, parse=str, show_default="the bundled all-MiniLM-L6-v2",
                                help="encoder folder or name")
    corpus: tuple[Path, ...] = setting(parse=Path, metavar="FILE",
                                       help="sentence files to rewire on, one rewired model each (e.g. the released "
                                            "elicit corpora pubmed_sents_no_punkt_10k_*)")
    repeat: int | None = setting(None, parse=int, show_default="all given",
                                 help="rewire on the first N corpora only")
    rewire_preset: str = setting(QUICK_PRESET, choices=sorted(PRESETS),
                                 help="a named bundle of the rewiring's settings, as `medlama rewire --preset`; "
                                      "--steps and --rewire-batch-size replace its values. demo: a CPU-sized run; "
                                      "paper: the published run (batch 192, 200 steps, max length 48)")
    steps: int | None = setting(None, parse=int, show_default="the preset's",
                                help="the rewiring's optimiser steps")
    rewire_batch_size: int | None = setting(None, parse=int, metavar="N", show_default="the preset's",
                                            help="the rewiring's pairs per optimiser step, `medlama rewire "
                                                 "--batch-size` (not inputs per forward pass as --batch-size)")
    tau: float | None = setting(None, parse=float, show_default="the preset's, 0.04",
                                help="the rewiring's InfoNCE temperature, `medlama rewire --tau` (0.04 is the authors' "
                                     "released run; the paper's table 8 stars 0.03)")
    save_steps: int | None = setting(None, parse=int, metavar="N", show_default="the preset's",
                                     help="the rewiring's checkpoint interval, `medlama rewire --save-steps` (the "
                                          "checkpoints --probe-checkpoints and --checkpoint-choice heldout use)")
    probe_checkpoints: bool = setting(False, switch=True, show_default=False,
                                      help="also probe every saved checkpoint and plot acc per step (figure 4)")
    heldout: Path | None = setting(None, parse=Path, metavar="FILE",
                                   help="a sentence file not among --corpus: also score every model's cloze "
                                        "self-retrieval on it (a pair per line long enough to mask: 1,955 of the 2,000 lines of "
                                        "the released pubmed_sents_no_punkt_10k_9), which shows whether rewiring did its job "
                                        "whatever the model knows")
    checkpoint_choice: Literal["last", "heldout"] = setting(
        "last", choices=CHECKPOINT_CHOICES,
        help="which checkpoint of each rewiring is probed: last: the final step (the paper's rule, a fixed number "
             "of steps, section 5.5); heldout: the saved checkpoint with the best held-out cloze self-retrieval "
             "acc@10 on --heldout (ties: the earlier step), an early-stopping rule that uses no probing data. "
             "results.json records the rule, the step chosen and each checkpoint's figure")

    def __post_init__(self) -> None:
        check(self)
        if self.checkpoint_choice == "heldout" and self.heldout is None:
            raise MedlamaInputError("--checkpoint-choice heldout chooses by the held-out cloze check: give --heldout "
                                    "FILE (a sentence file not among --corpus)")
