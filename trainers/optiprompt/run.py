"""``medlama optiprompt`` and ``medlama.optiprompt``: learned prompts for every relation of a BioLAMA folder,
the one path both take (:func:`train_prompts`).

Every check first (settings, the data folder, its ``train`` and ``dev`` splits and their rows, the output
place), then the model (a masked LM with its MLM head: a causal or encoder-only model is refused) and the one
claim of ``OUT`` for the whole run. Each relation is trained (:func:`medlama.trainers.optiprompt.trainer.train_relation`)
and kept as a shard beside ``OUT`` (:class:`~medlama.core.resume.ShardStore`), so a killed run continues at the
next relation; a rerun with other settings, model or data is refused, naming what differs. ``OUT`` is written
once, atomically, when every relation is done: ``prompts.json``, the vectors and a model-card README
(:mod:`medlama.probers.learned_prompts` reads it back for ``medlama probe --prompts``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from medlama.core.atomic import check_output_place, claim_directory, staged_directory
from medlama.core.display import print_table
from medlama.core.errors import MedlamaInputError
from medlama.core.models import check_device, resolve_model
from medlama.core.provenance import model_identity, package_versions, provenance
from medlama.core.resume import ShardStore, discard_work_folder
from medlama.core.settings import Checked, setting
from medlama.datasets.folders import DataFolder, folder_configs, load_config, resolve_folder
from medlama.datasets.declared.biolama import group_of
from medlama.runs.biolama_queries import load_biolama_queries
from medlama.probers.learned_prompts import (FORMAT, OUTPUT_KIND, PROMPTS_FILE, LearnedPrompt, base_identity,
                                             check_manual, subject_of, write_prompts)
from medlama.probers.prompt_data import fingerprint, split_record
from medlama.probers.mask_predict import PRESETS, MaskPredictProber, MaskPredictSettings
from medlama.runs.tables import percent
from medlama.trainers.optiprompt.trainer import OptiPromptSettings, TrainedPrompt, train_relation
from medlama.trainers.optiprompt.card import prompts_card

#: BioLAMA's decoding (X-FACTR, run_optiprompt.py's settings): confidence fill, no refinement, 10 masks, beam 5.
DECODING = PRESETS["biolama"]
TRAIN_SPLIT, DEV_SPLIT = "train", "dev"
_COLUMNS = ("query", "template", "obj_labels", "source", "relation")


@dataclass(frozen=True)
class OptiPromptRun(Checked):
    """What to train and where (``medlama optiprompt``'s own flags)."""

    model: str = setting(help="the masked LM (a folder or Hub id) whose prompts are learned")
    data: str = setting(help="a BioLAMA folder (medlama build biolama), a push-dataset dry run or a Hub dataset id; "
                             "any built folder with train and dev splits")
    out: Path = setting(parse=Path, metavar="PROMPTS", help="the prompts folder to write")
    config: str = setting("all", help="the configs whose relations are trained: all, ctd, umls, wikidata or "
                                      "<source>_<PID>")
    relations: tuple[str, ...] | None = setting(None, metavar="REL", help="train only these relations (UR44 or "
                                                                          "umls_UR44; none: all)")
    device: str | None = setting(None, help="cpu, cuda, cuda:N or mps; none: CUDA when there is one")
    overwrite: bool = setting(False, switch=True, help="replace the prompts of an earlier finished run in OUT "
                                                       "(and start over rather than continue an interrupted one)")


@dataclass
class OptiPromptResult:
    """The prompts folder written and its record (``prompts.json``)."""

    path: Path
    record: dict

    @property
    def identity(self) -> str:
        return self.record["identity"]


def _relation_rows(folder: DataFolder, config: str, split: str, relations: tuple[str, ...] | None) -> dict[str, dict]:
    """``{<source>_<PID>: columns}`` of ``split``, only ``relations`` when given; an error for a missing split,
    a missing column, an unknown relation or none with rows."""
    if split not in _splits(folder, config):
        raise MedlamaInputError(f"config {config!r} has no {split!r} split: OptiPrompt trains on {TRAIN_SPLIT!r} and "
                                f"selects on {DEV_SPLIT!r}", file=folder.path)
    rows = load_config(folder.path, config, split)
    missing = [c for c in _COLUMNS if c not in rows.column_names]
    if missing:
        raise MedlamaInputError(f"config {config!r}, split {split!r} is not BioLAMA-like: no column(s) "
                                f"{', '.join(missing)}", file=folder.path)
    groups = [group_of(s, r) for s, r in zip(rows["source"], rows["relation"])]
    out: dict[str, dict] = {}
    columns = {c: rows[c] for c in ("query", "template", "obj_labels")}
    for i, group in enumerate(groups):
        part = out.setdefault(group, {c: [] for c in columns})
        for c in columns:
            part[c].append(columns[c][i])
    if relations:
        wanted = {}
        for name in relations:
            found = [g for g in out if name in (g, g.split("_", 1)[1])]
            if not found:
                raise MedlamaInputError(f"relation {name!r} has no rows in the {split!r} split of config {config!r} "
                                        f"(it has {', '.join(sorted(out)) or 'none'})", file=folder.path)
            wanted.update({g: out[g] for g in found})
        out = wanted
    if not out:
        raise MedlamaInputError(f"the {split!r} split of config {config!r} has no rows", file=folder.path)
    return out


def _splits(folder: DataFolder, config: str) -> list[str]:
    configs = folder_configs(folder.path)
    if config not in configs:
        raise MedlamaInputError(f"unknown config {config!r}; the dataset has {sorted(configs)}", file=folder.path)
    return list(configs[config])


def train_prompts(run: OptiPromptRun, settings: OptiPromptSettings = OptiPromptSettings(),
                  decoding: MaskPredictSettings = DECODING, *, report: bool = True) -> OptiPromptResult:
    """Train, select and write the prompts of every relation of ``run`` (see the module docstring)."""
    if decoding.prompts is not None:
        raise MedlamaInputError("OptiPrompt decodes with the prompts it trains; leave the decoding's prompts out")
    decoding = replace(decoding, batch_size=settings.batch_size)
    device = check_device(run.device)
    resolve_model(run.model)
    folder = resolve_folder(run.data, dataset="biolama")
    train = _relation_rows(folder, run.config, TRAIN_SPLIT, run.relations)
    dev = _relation_rows(folder, run.config, DEV_SPLIT, tuple(train))  # each relation needs dev rows to pick an epoch
    manuals = {}
    for name, rows in train.items():
        manuals[name] = rows["template"][0]
        check_manual(manuals[name], name)
    # what the prompts are trained and selected on, so that a probe of another build can find those facts
    data = {split: split_record(split, rows, lambda relation, query: subject_of(manuals[relation], query))
            for split, rows in ((TRAIN_SPLIT, train), (DEV_SPLIT, dev))}
    check_output_place(run.out, reads=[run.model, run.data])
    hint = "give --overwrite (overwrite=True) to replace them, or choose another --out"
    with claim_directory(run.out, marker=PROMPTS_FILE, kind=OUTPUT_KIND, reads=[run.model, run.data],
                         finished=None if run.overwrite else hint):
        prober = MaskPredictProber(run.model, decoding, device=device)  # refuses a model without an MLM head
        base = {**base_identity(prober.lm), "model": model_identity(run.model)}
        manifest = {"base": base, "data": folder.info, "config": run.config, "relations": sorted(train),
                    "training_data": {split: fingerprint(item) for split, item in data.items()},
                    "training": asdict(settings), "decoding": asdict(decoding)}
        store = ShardStore.open(run.out, kind=OUTPUT_KIND, manifest=manifest, overwrite=run.overwrite,
                                hint="give --overwrite to start over")
        trained: dict[str, dict] = {}
        started = time.perf_counter()
        for name in sorted(train):
            key = {"relation": name}
            if store.has(key):
                trained[name] = store.read(key)[0][0]
                continue
            dev_queries = load_biolama_queries(folder, run.config, split=DEV_SPLIT, relations=[name])
            outcome = train_relation(prober, name, manuals[name], train[name], dev_queries, settings,
                                     progress=True)  # a bar where progress shows (core.progress decides)
            trained[name] = store.write(key, [_shard(outcome)])[0]
        prompts = {name: LearnedPrompt(name, item["manual"], item["template"], _tensor(item["vectors"]))
                   for name, item in trained.items()}
        record = {"format": FORMAT, "kind": OUTPUT_KIND, "base": base, "data": folder.info, "config": run.config,
                  "training": {**asdict(settings), "train_split": TRAIN_SPLIT, "dev_split": DEV_SPLIT},
                  "training_data": {"train": data[TRAIN_SPLIT], "dev": data[DEV_SPLIT]},
                  "decoding": {"method": "mask-predict", **{k: v for k, v in asdict(decoding).items()
                                                            if k not in ("prompts", "allow_train_overlap")}},
                  "versions": package_versions(),
                  # when, by which command and on what it was trained (outside the identity, which is content)
                  "provenance": {key: value for key, value in provenance(device=run.device).items()
                                 if key != "versions"},
                  "seconds": round(time.perf_counter() - started, 3),
                  "relations": {name: {k: v for k, v in item.items() if k != "vectors"}
                                for name, item in trained.items()}}
        with staged_directory(run.out, marker=PROMPTS_FILE, kind=OUTPUT_KIND) as staging:
            written = write_prompts(staging, record, prompts)
            (staging / "README.md").write_text(prompts_card(written), encoding="utf-8")
        discard_work_folder(run.out, kind=OUTPUT_KIND)
    if report:
        print_dev_table(written)
        print(f"wrote {Path(run.out) / PROMPTS_FILE} (identity {written['identity'][:12]})")
    return OptiPromptResult(Path(run.out), written)


def _shard(outcome: TrainedPrompt) -> dict:
    prompt = outcome.prompt
    return {"manual": prompt.manual, "template": prompt.template, "vectors": prompt.vectors.tolist(),
            "dev_curve": outcome.curve, "best_epoch": outcome.best_epoch, "manual_dev_acc@1": outcome.manual_dev,
            "dev_acc@1": outcome.curve[outcome.best_epoch], "train_examples": outcome.examples,
            "steps": outcome.steps, "train_loss": outcome.losses, "seconds": outcome.seconds}


def _tensor(values: Any):
    import torch  # torch only once prompts are written

    return torch.tensor(values, dtype=torch.float32)


def print_dev_table(record: dict) -> None:
    """Manual vs learned dev acc@1 per relation."""
    rows = [[name, percent(rel["manual_dev_acc@1"]), percent(rel["dev_acc@1"]), rel["best_epoch"],
             rel["train_examples"]] for name, rel in sorted(record["relations"].items())]
    print_table("OptiPrompt: dev acc@1 (%), manual vs learned prompt", ["relation", "manual", "learned",
                                                                       "epoch kept", "train pairs"], rows,
                caption="decoded with mask predict (BioLAMA's settings); scored as BioLAMA (normalised match)")
