"""Rewire-then-Probe end to end: probe an encoder, rewire it on N corpora, probe each rewired model.

This is the paper's recipe (section 4, table 5): the same encoder is probed before and after
Contrastive-Probe rewiring, and rewiring on several sentence sets gives a mean and a standard
deviation. Scores come from the acc@k metric module; each rewired model's card records them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from medlama.core.checkpoints import checkpoint_step, list_checkpoints
from medlama.runs.outputs import PREDICTIONS_FILE, RESULTS_FILE, write_predictions
from medlama.runs.result import ProbeResult, step_record
from medlama.runs.scores import REPORT_KS
from medlama.runs.model_probe import probe_checkpoints as probe_every_checkpoint, probe_model
from medlama.probers.query_set import QuerySet
from medlama.runs.tables import mean_std
from medlama.probers.retrieval import PRESETS, RetrievalSettings
from medlama.core.models import resolve_model
from medlama.trainers.config import RewireConfig
from medlama.trainers.model_card import update_model_card_scores
from medlama.runs.result import is_bundled as _is_bundled
from medlama.core.provenance import provenance, public_word
from medlama.runs.outputs import write_results
from medlama.core.errors import MedlamaInputError
from medlama.recipe.heldout import cloze_self_retrieval, heldout_queries as make_heldout
from medlama.recipe.settings import CHECKPOINT_CHOICES

#: What each rule of ``checkpoint_choice`` picks, as results.json records it.
CRITERIA = {"last": "the final step (the paper's rule: a fixed number of steps, section 5.5)",
            "heldout": "the best held-out cloze self-retrieval acc@10 among the saved checkpoints (ties: the "
                       "earlier step)"}


def choose_checkpoint(model: Path, heldout_queries: QuerySet, *, label: str, device: str | None = None
                      ) -> tuple[Path, ProbeResult, dict]:
    """The saved checkpoint of the rewired ``model`` with the best held-out cloze acc@10 (ties: the earlier
    step), its held-out result, and the record: the step chosen and every checkpoint's acc@1 and acc@10."""
    paths = list_checkpoints(model)
    if not paths:
        raise MedlamaInputError("no saved checkpoint to choose from (checkpoints/ is empty)", file=model)
    scored = [(checkpoint_step(path), path, cloze_self_retrieval(path, heldout_queries, device=device,
                                                                 label=f"{label}@{checkpoint_step(path)}"))
              for path in paths]
    step, path, best = max(scored, key=lambda item: (item[2].acc(10), -item[0]))
    record = {"chosen_step": step, "chosen": f"checkpoints/{path.name}",
              "heldout_acc@10": {str(s): r.acc(10) for s, _, r in scored},
              "heldout_acc@1": {str(s): r.acc(1) for s, _, r in scored}}
    return path, best, record


@dataclass
class RecipeResult:
    base: ProbeResult
    rewired: list[ProbeResult]
    models: list[Path]
    #: per rewired model: {step: ProbeResult} over its checkpoints (figure 4), when asked for.
    checkpoints: list[dict[int, ProbeResult]] = field(default_factory=list)
    rewire_seconds: list[float] = field(default_factory=list)
    #: held-out cloze self-retrieval (:mod:`medlama.recipe.heldout`) of the base and each rewired model
    heldout_base: ProbeResult | None = None
    heldout_rewired: list[ProbeResult] = field(default_factory=list)
    #: what the run was given (for :meth:`save`): the rewiring settings, corpora and held-out file
    rewire_config: dict = field(default_factory=dict)
    corpora: list[str] = field(default_factory=list)
    heldout: str | None = None
    #: which checkpoint of each rewiring was probed (:func:`choose_checkpoint`): the rule, its criterion, and
    #: per rewired model the step chosen and every checkpoint's figure
    checkpoint_choice: dict = field(default_factory=dict)

    def summary(self, ks: Sequence[int] = REPORT_KS) -> dict:
        """acc@k of the base model and mean / std over the rewired models, micro and macro (and the held-out
        cloze self-retrieval, when scored)."""
        out: dict = {"base": {}, "rewired_mean": {}, "rewired_std": {}, "runs": len(self.rewired)}
        for average in ("micro", "macro"):
            for k in ks:
                key = f"acc@{k}" if average == "micro" else f"acc@{k}_macro"
                out["base"][key] = self.base.acc(k, average)
                mean, std = mean_std(self.rewired, k, average)
                out["rewired_mean"][key], out["rewired_std"][key] = mean, std
        if self.heldout_base is not None:
            out["heldout_cloze"] = {"base": {}, "rewired_mean": {}, "rewired_std": {},
                                    "pairs": len(self.heldout_base.ids)}
            for k in (1, 10):
                key = f"acc@{k}"
                out["heldout_cloze"]["base"][key] = self.heldout_base.acc(k)
                mean, std = mean_std(self.heldout_rewired, k)
                out["heldout_cloze"]["rewired_mean"][key], out["heldout_cloze"]["rewired_std"][key] = mean, std
        return out

    def results_json(self, *, argv: Sequence[str] | None = None) -> dict:
        """``results.json`` of the recipe: the summary (mean and std; std ``None`` for one run), each run's
        scores, intervals and per-relation table (no per-query predictions: those go to ``predictions.jsonl``),
        and the provenance block (data, the base and rewired models, the settings, command, date, device)."""

        runs = [self.base, *self.rewired]
        settings = {"probe": self.base.settings, "rewire": self.rewire_config}
        block = provenance(settings=settings, data=self.base.data or {"query_set": self.base.query_set},
                           models=[None if _is_bundled(self.base.model) else self.base.model, *map(str, self.models)],
                           device=self.base.device, argv=argv)
        for part in ("probe", "rewire"):  # a model's local path is no part of the record; a Hub id stays whole
            value = (block["settings"].get(part) or {}).get("model")
            if isinstance(value, str):
                block["settings"][part]["model"] = public_word(value)
        return {"summary": self.summary(), "query_set": self.base.query_set, "probe_settings": self.base.settings,
                "rewire_config": self.rewire_config, "corpora": self.corpora,
                "rewired_models": [str(m) for m in self.models], "rewire_seconds": self.rewire_seconds,
                "heldout": self.heldout, "checkpoint_choice": self.checkpoint_choice,
                "runs": [{**r.to_json(queries=False), "per_relation": r.per_relation()} for r in runs],
                # each rewired model's checkpoint probes (--probe-checkpoints): what `medlama figure steps` draws
                "checkpoints": [{"corpus": Path(corpus).name, "steps": {str(step): step_record(r)
                                                                        for step, r in sorted(by_step.items())}}
                                for corpus, by_step in zip(self.corpora, self.checkpoints)],
                "predictions": PREDICTIONS_FILE, "provenance": block}

    def save(self, out: str | Path, *, argv: Sequence[str] | None = None) -> tuple[Path, Path]:
        """Write ``out/results.json`` (:meth:`results_json`) and ``out/predictions.jsonl`` (every run's
        per-query top 10, one line per run and query, keyed by ``run``)."""
        out = Path(out)
        predictions = write_predictions(out / PREDICTIONS_FILE, [self.base, *self.rewired])
        return write_results(out / RESULTS_FILE, self.results_json(argv=argv)), predictions  # the marker last


def rewire_then_probe(queries: QuerySet, corpora: Sequence[str | Path], out: str | Path, *,
                      model: str | Path | None = None, rewire_config=None,
                      probe_settings: RetrievalSettings = PRESETS["reference"],
                      probe_checkpoints: bool = False, heldout: str | Path | None = None,
                      progress=print, device: str | None = None, rewire_preset: str | None = None,
                      checkpoint_choice: str = "last") -> RecipeResult:
    """Probe ``model`` (default: the bundled encoder), rewire it on each corpus, and probe again.

    Rewired models go to ``out/rewired-<i>-<corpus name>`` (an interrupted run resumes there);
    the returned result holds every probe. ``heldout``: a sentence file none of ``corpora`` holds; every
    model is also scored on its cloze self-retrieval (:mod:`medlama.recipe.heldout`), which tells
    whether rewiring did its job whatever the model knows. ``device``: where the probes run (``cuda``,
    ``cuda:1``, ``cpu``...; default: CUDA when there is one); the rewiring picks its own. ``rewire_preset``:
    the preset ``rewire_config`` was made from (recorded in each rewired model's command line).
    ``checkpoint_choice``: ``last`` (default, the paper's fixed number of steps) probes each rewiring's final
    model; ``heldout`` (needs ``heldout``) the saved checkpoint with the best held-out cloze acc@10
    (:func:`choose_checkpoint`); the result records the rule, the step chosen and each checkpoint's figure.

    A rewired model already there with the same settings is kept as it is (a rewiring never trains past its
    steps); one trained for fewer steps trains on; one trained for more steps, or with other settings, is
    refused.
    """
    # trainers.trainer loads (it imports sentence_transformers, torch) when this runs, not when medlama.recipe.workflow is imported
    from medlama.trainers.trainer import rewire

    if checkpoint_choice not in CHECKPOINT_CHOICES:
        raise MedlamaInputError(f"unknown checkpoint_choice {checkpoint_choice!r}; "
                                f"choose from {list(CHECKPOINT_CHOICES)}")
    if checkpoint_choice == "heldout" and heldout is None:
        raise MedlamaInputError("checkpoint_choice='heldout' chooses by the held-out cloze check: give heldout "
                                "(a sentence file not among the corpora)")
    out = Path(out)
    base_model = resolve_model(model)
    config = rewire_config or RewireConfig.preset()
    if model is not None:
        config = RewireConfig(**{**config.to_dict(), "model": str(model)})
    progress(f"probing the un-rewired model on {queries.name} ({len(queries):,} queries, "
             f"{len(queries.candidates):,} candidates)")
    base = probe_model("retrieval", base_model, probe_settings, queries, label="un-rewired", device=device)
    result = RecipeResult(base=base, rewired=[], models=[], rewire_config=config.to_dict(),
                          corpora=[str(corpus) for corpus in corpora],
                          heldout=str(heldout) if heldout is not None else None,
                          checkpoint_choice={"rule": checkpoint_choice, "criterion": CRITERIA[checkpoint_choice],
                                             "models": []})
    heldout_queries = None
    if heldout is not None:
        used = {Path(corpus).resolve() for corpus in corpora}
        if Path(heldout).resolve() in used:
            raise MedlamaInputError("the held-out corpus is one of the rewiring corpora; give a file none of them "
                                    "holds", file=heldout)
        heldout_queries = make_heldout(heldout, mask_ratio=config.mask_ratio)
        progress(f"held-out cloze self-retrieval of the un-rewired model ({len(heldout_queries):,} pairs of "
                 f"{Path(heldout).name})")
        result.heldout_base = cloze_self_retrieval(base_model, heldout_queries, label="un-rewired", device=device)
    for index, corpus in enumerate(corpora):
        name = Path(corpus).name
        target = out / f"rewired-{index}-{name}"
        progress(f"rewiring on {name} ({config.steps} steps, batch {config.batch_size}) -> {target}")
        start = time.perf_counter()
        rewired = rewire(corpus, target, config, preset=rewire_preset)
        result.rewire_seconds.append(time.perf_counter() - start)
        chosen, record = rewired.path, {"corpus": name, "chosen_step": config.steps, "chosen": "final model"}
        heldout_result = None
        if checkpoint_choice == "heldout":
            path, heldout_result, record = choose_checkpoint(rewired.path, heldout_queries, label=f"rewired ({name})",
                                                             device=device)
            record = {"corpus": name, **record}
            progress(f"checkpoint chosen by held-out cloze acc@10: step {record['chosen_step']} of {name} ("
                     + ", ".join(f"step {s}: {100 * v:.2f}" for s, v in record["heldout_acc@10"].items()) + ")")
            if record["chosen_step"] != config.steps:  # the final model is the last step's checkpoint
                chosen = path
        result.checkpoint_choice["models"].append(record)
        progress(f"probing the model rewired on {name}")
        probed = probe_model("retrieval", chosen, probe_settings, queries, label=f"rewired ({name})", device=device)
        result.rewired.append(probed)
        result.models.append(chosen)
        if heldout_result is not None:  # scored while choosing: the same model, the same pairs
            result.heldout_rewired.append(replace(heldout_result, label=f"rewired ({name})"))
        elif heldout_queries is not None:
            result.heldout_rewired.append(cloze_self_retrieval(chosen, heldout_queries,
                                                               label=f"rewired ({name})", device=device))
        if chosen == rewired.path:  # a checkpoint's scores are not the final model's: its card is left as it is
            update_model_card_scores(rewired.path, {f"MedLAMA {queries.name}": _scores(probed)},
                                     source="medlama recipe (Contrastive-Probe retrieval, reference settings)")
        if probe_checkpoints:
            result.checkpoints.append(probe_every_checkpoint(rewired.path, probe_settings, queries, name=name,
                                                             device=device))
    return result


def _scores(result: ProbeResult) -> dict:
    return {key: round(100 * result.metrics[key], 2) for key in result.metrics
            if key.startswith("acc@")}
