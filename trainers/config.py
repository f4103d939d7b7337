"""The rewiring configuration, defined once: :class:`RewireConfig` and its :data:`PRESETS`.

Each field is a :func:`medlama.core.settings.setting` carrying its help text and bounds; from those fields come
the checks (in ``__post_init__``, so no invalid config exists), the ``medlama rewire`` flags
(the CLI's ``flags`` module), the recorded command line (:func:`medlama.core.settings.to_flags`) and the
settings a resumed run must share with the run that wrote its checkpoints (:data:`MUST_MATCH_ON_RESUME`:
every field not marked ``resume="may_change"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from medlama.core.errors import MedlamaInputError
from medlama.core.settings import Checked, as_dict, check, fields_of, flag_of, setting, settings_from
from medlama.runs.arguments import check_release_relations

#: The preset of ``medlama rewire``, of :meth:`RewireConfig.preset` and of the recipe workflow's rewiring when
#: no config is given: the published run, so that a rewiring reproduces the paper unless asked otherwise.
DEFAULT_PRESET = "paper"
#: The preset of ``medlama.rewire()`` and ``medlama recipe``: the quick starts, which should finish on a
#: laptop's CPU (about a minute with the bundled model) rather than run the paper's GPU-sized batch.
QUICK_PRESET = "demo"
#: ``resume=`` value of the settings a resumed run may change (the others must match the checkpoints).
MAY_CHANGE = "may_change"


@dataclass(frozen=True)
class RewireConfig:
    """Everything that defines a rewiring run. See :data:`PRESETS` and :meth:`preset`.

    ``batch_size`` is the global batch (pairs per optimiser step, summed over devices); ``layer`` keeps the
    first ``layer`` transformer layers (``None``: all); ``dropout`` sets every dropout probability of the
    encoder (``None``: keep the model's); ``max_sentences`` samples that many corpus lines (``None``: all);
    ``batch_sampler`` is ``"no_duplicates"`` (no text twice in a batch, so a repeated answer such as
    ``"patients"`` is never its own negative) or ``"random"`` (plain shuffled batches, as the reference code);
    ``precision`` is ``"auto"`` (bf16 on a CUDA card that supports it, else fp16 on CUDA, else fp32),
    ``"fp32"``, ``"fp16"`` (CUDA only) or ``"bf16"`` (CUDA or CPU autocast).

    Frozen: a changed config is a new one (``dataclasses.replace`` or :meth:`preset` with overrides), so
    it is checked as it is made.
    """

    model: str | None = setting(None, help="Hugging Face encoder folder or hub name (none: the bundled "
                                           "sentence-transformers/all-MiniLM-L6-v2)")
    steps: int = setting(200, help="training steps", min=1, resume=MAY_CHANGE)
    batch_size: int = setting(192, metavar="N", help="pairs per optimiser step, summed over devices (at least 2: the loss "
                                        "needs in-batch negatives)", min=2)
    learning_rate: float = setting(2e-5, help="learning rate (AdamW, linear decay)", flag="--lr")
    weight_decay: float = setting(0.01, help="AdamW weight decay", min=0)
    warmup_steps: int = setting(0, help="linear warm-up steps", min=0)
    max_length: int = setting(48, help="tokens per text", min=1)
    temperature: float = setting(0.04, help="InfoNCE temperature tau (scale = 1/tau)", flag="--tau")
    mask_ratio: float = setting(0.5, help="masked span: 1 to 1 + int(words * ratio) words", min=0, max=1)
    layer: int | None = setting(None, help="keep the first L transformer layers (none: all)", min=1)
    dropout: float | None = setting(0.1, help="hidden and attention dropout, below 1 (none, or "
                                              "--keep-model-dropout: the model's own)", min=0)
    save_steps: int = setting(50, help="checkpoint every N steps (the last step always is)", min=1,
                              resume=MAY_CHANGE)
    seed: int = setting(33, help="seed of the masks, the batches and the training", min=0)
    max_sentences: int | None = setting(None, help="use a random sample of N corpus lines (none, or 0 on the "
                                                   "command line: all)", min=1)
    skip_short_lines: bool = setting(False, help="leave out lines too short to mask, and count them (otherwise "
                                                 "such a line is an error)")
    batch_sampler: Literal["no_duplicates", "random"] = setting(
        "no_duplicates", help="no_duplicates: no text twice in a batch; random: plain shuffled batches")
    precision: Literal["auto", "fp32", "fp16", "bf16"] = setting(
        "auto", help="auto: bf16 on CUDA cards that support it, else fp16 on CUDA, else fp32; bf16 also runs "
                     "on CPU (autocast)", resume=MAY_CHANGE)
    mask_token: str | None = setting(None, help="the mask string in queries (none: the tokenizer's mask token)")
    logging_steps: int = setting(10, help="log the loss every N steps", min=1, resume=MAY_CHANGE)
    eval_steps: int | None = setting(None, help="probe MedLAMA every N steps while training (acc@1, acc@10, "
                                                "MRR@10 in the trainer log; none: never)", min=1,
                                     resume=MAY_CHANGE)
    eval_data: str | None = setting(None, help="MedLAMA to probe with --eval-steps: a built folder or Hub dataset "
                                               "id (none: the cached build, as medlama probe)", resume=MAY_CHANGE)
    eval_config: str = setting("hard", help="MedLAMA config probed with --eval-steps (hard or full)",
                               resume=MAY_CHANGE)
    eval_relations: tuple[str, ...] | None = setting(None, help="relations probed with --eval-steps (none: all)",
                                                     metavar="REL", resume=MAY_CHANGE)
    eval_limit: int | None = setting(50, help="first N queries per relation probed with --eval-steps (none: "
                                              "all)", min=1, resume=MAY_CHANGE)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> RewireConfig:
        """Check every field (types, choices, bounds, and the open bounds ``min`` cannot say); return self."""
        check(self)
        for name in ("learning_rate", "temperature"):
            if not getattr(self, name) > 0:
                raise MedlamaInputError(f"setting {name!r}: {name.replace('_', ' ')} must be a positive number, "
                                        f"got {getattr(self, name)!r}")
        if self.dropout is not None and not self.dropout < 1:
            raise MedlamaInputError(f"setting 'dropout' must be below 1, got {self.dropout!r}")

        check_release_relations("medlama", self.eval_data, self.eval_relations)  # not after hours of training
        return self

    @classmethod
    def preset(cls, name: str = DEFAULT_PRESET, **overrides: Any) -> RewireConfig:
        """A preset (``"paper"``, the default, or ``"demo"``) with some fields replaced; ``None`` overrides are
        ignored (they mean "not given"); an unknown setting name is an error naming the nearest known one."""
        if name not in PRESETS:
            raise MedlamaInputError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return settings_from(cls, {k: v for k, v in overrides.items() if v is not None}, base=PRESETS[name],
                             what="rewire")

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


#: ``paper``: the published run (upstream README, paper section 5 and table 8; table 8 stars tau 0.03 where
#: the upstream README uses 0.04). ``demo``: a CPU-sized run for the bundled model, about 1.5 s a step on two
#: idle CPU cores (benchmarks/bench_rewire.py): a sixth of the batch and a quarter of the steps, so the learning
#: rate is the top of table 8's grid (5e-5); max length stays 48 (at 32, 17% of the PubMed queries lose their
#: mask token to truncation; at 48, 3.7%, as in the reference).
PRESETS: dict[str, RewireConfig] = {
    "paper": RewireConfig(steps=200, batch_size=192, learning_rate=2e-5, weight_decay=0.01, max_length=48,
                          temperature=0.04, mask_ratio=0.5, seed=33, save_steps=50, max_sentences=10_000,
                          dropout=0.1),
    "demo": RewireConfig(steps=50, batch_size=32, learning_rate=5e-5, weight_decay=0.01, max_length=48,
                         temperature=0.04, mask_ratio=0.5, seed=33, save_steps=25, max_sentences=10_000,
                         dropout=0.1, logging_steps=5),
}

#: Settings that a resumed run must share with the run that wrote the checkpoints.
MUST_MATCH_ON_RESUME: tuple[str, ...] = tuple(f.name for f in fields_of(RewireConfig)
                                              if f.metadata.get("resume") != MAY_CHANGE)
#: Flags of the settings a resumed run may change (for messages).
MAY_CHANGE_ON_RESUME: tuple[str, ...] = tuple(flag_of(f) for f in fields_of(RewireConfig)
                                              if f.metadata.get("resume") == MAY_CHANGE)


@dataclass(frozen=True, kw_only=True)
class RewireRun(Checked):
    """What a rewiring run is given besides its :class:`RewireConfig`: the corpus files, the output folder, the
    preset the config starts from, and where training resumes (``medlama rewire``'s flags come from these)."""

    corpus: tuple[Path, ...] = setting(parse=Path, metavar="FILE",
                                       help="sentence files, one sentence per line (e.g. "
                                            "../shared/data/elicit_corpora/*_0)")
    out: Path = setting(parse=Path, help="output folder")
    preset: str = setting(DEFAULT_PRESET, choices=sorted(PRESETS),
                          help="a named bundle of the rewiring's settings; the flags given replace its values. "
                               "paper: batch 192, lr 2e-5, 200 steps, max length 48, tau 0.04, checkpoint every 50 "
                               "steps, 10k sentences; demo: a CPU-sized run, batch 32, lr 5e-5, 50 steps, checkpoint "
                               "every 25")
    no_resume: bool = setting(False, switch=True, show_default=False,
                              help="start over; an error if OUT already holds checkpoints (they are never deleted)")
    resume_from: Path | None = setting(None, parse=Path, metavar="CHECKPOINT",
                                       show_default="the last complete one in OUT",
                                       help="resume from this checkpoint folder")

    @property
    def resume(self) -> bool | Path:
        """The trainer's ``resume``: False (start over), a checkpoint folder, or True (the last in ``out``)."""
        return False if self.no_resume else (self.resume_from if self.resume_from else True)
