"""The model card (``README.md``) of a rewired model, as ``huggingface_hub`` card classes write it.

:func:`write_rewire_card` replaces the generic card sentence-transformers writes on ``save()`` (its YAML
carries ``widget`` examples cut from the training cloze pairs, and its usage snippet the placeholder
``sentence_transformers_model_id`` and training fragments as example sentences) with one built from the run
record (``rewire_config.json``): a :class:`~huggingface_hub.ModelCardData` header (``license``, ``language``,
``datasets``, ``base_model``, ``library_name``, ``pipeline_tag``, ``tags``, one biomedical ``widget`` example)
and a body with the rewiring table, usage, probing scores, versions and citation.
:func:`update_model_card_scores` (the recipe calls it after probing) writes the scores as
:class:`~huggingface_hub.EvalResult` entries, so the card's ``model-index`` holds them, and as a table in
the body. :func:`card_for_repo` gives the text to push to a repository: the placeholder becomes its id.

``model-index`` entries: task type ``fill-mask`` (a Hub task id: MedLAMA queries are cloze prompts whose
``[Y]`` slot is filled, here by retrieval among the candidate names), dataset type the MedLAMA Hub dataset id
when given, else ``medlama``; dataset config ``hard``/``full``; metric types ``acc@1``, ``acc@10``, ... (micro,
over queries) and ``acc@1_macro``, ... (mean over relations), with values as the caller gives them (the recipe
and ``push-model --results``: percentages).

A little over the usual module size on purpose: writing, scoring and pushing are one card's life, and share
its markers, placeholder and header rules.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medlama.core.atomic import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.models import is_hub_id
from medlama.core.integrity import record_again

CARD_NAME = "README.md"
SCORES_NAME = "probing_scores.json"
#: sentence-transformers' own stand-in for the repository id (its ``push_to_hub`` replaces it too).
MODEL_ID_PLACEHOLDER = "sentence_transformers_model_id"
#: The Hub task type of the probing results (module docstring).
TASK_TYPE = "fill-mask"
TASK_NAME = "Biomedical knowledge probing (cloze queries answered by retrieval over candidate names)"
#: Licences of base models whose card is not at hand (the bundled encoder ships without its README).
KNOWN_LICENCES = {"sentence-transformers/all-MiniLM-L6-v2": "apache-2.0"}
TAGS = ["sentence-transformers", "sentence-similarity", "feature-extraction", "contrastive-probe", "medlama",
        "biomedical", "knowledge-probing", "loss:ClozeInfoNCELoss"]

_REWIRE_START, _REWIRE_END = "<!-- medlama:rewire:start -->", "<!-- medlama:rewire:end -->"
_SCORES_START, _SCORES_END = "<!-- medlama:scores:start -->", "<!-- medlama:scores:end -->"
_NO_SCORES = ("Not measured yet. Probe the model (`medlama probe --model PATH --out PROBE_OUT`) and put the scores "
              "into the card it is pushed with (`medlama push-model PATH REPO_ID --results PROBE_OUT`), or into "
              "this folder's card (`medlama.trainers.model_card.update_model_card_scores(path, scores)`).")
_USAGE_LINE = re.compile(rf'SentenceTransformer\("{MODEL_ID_PLACEHOLDER}"\)[^\n]*')
_METRIC = re.compile(r"^(acc@\d+(_macro)?|mrr|mean_reciprocal_rank)$", re.I)

CITATION = """@inproceedings{meng-etal-2022-rewire,
    title = "Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models",
    author = "Meng, Zaiqiao and Liu, Fangyu and Shareghi, Ehsan and Su, Yixuan and Collins, Charlotte and
      Collier, Nigel",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics",
    year = "2022",
}"""

_TEMPLATE = """---
{{ card_data }}
---

{{ rewire_section }}

## Usage

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{{ placeholder }}")  # the Hub id once pushed; locally, this folder's path
queries = ["metformin might treat {{ mask_token }} ."]
names = ["type 2 diabetes mellitus", "hypertension", "asthma"]
print(model.similarity(model.encode(queries), model.encode(names)))
```

The probing results below use the reference setting (`[CLS]` vectors, exact L2 nearest neighbours over
the candidate names), which `medlama probe --model {{ placeholder }}` reproduces.

## Probing scores

{{ scores_section }}

## Licence

{{ licence }}

## Framework versions

{{ versions }}

## Citation

```bibtex
{{ citation }}
```
"""


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "model default"
    return str(value)


def _replace_block(text: str, start: str, end: str, block: str) -> str | None:
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        return None
    return text[:i] + block + text[j + len(end):]


def _is_hub_id(name: str) -> bool:
    return bool(name) and not Path(name).expanduser().exists() and is_hub_id(name)


def base_model_id(record: Mapping[str, Any]) -> str | None:
    """The Hub id of the base model: its recorded name when that is a Hub id, else the repository of a
    Hugging Face cache snapshot it was loaded from, else ``None`` (a local folder of unknown origin)."""
    base = record.get("base_model") or {}
    name = str(base.get("name") or "")
    if _is_hub_id(name):
        return name
    match = re.search(r"(?:^|[\\/])models--(.+?)[\\/]snapshots[\\/]", str(base.get("path") or ""))
    return match.group(1).replace("--", "/", 1) if match else None


def base_model_licence(record: Mapping[str, Any]) -> str | None:
    """The base model's licence: known for the bundled encoder, else the ``license`` of the card in its
    folder (or in the sentence-transformers folder around it), else ``None``."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCard

    hub_id = base_model_id(record)
    if hub_id in KNOWN_LICENCES:
        return KNOWN_LICENCES[hub_id]
    path = Path(str((record.get("base_model") or {}).get("path") or ""))
    if not str(path) or not path.is_dir():
        return None
    for folder in (path, path.parent) if (path.parent / "modules.json").is_file() else (path,):
        if (folder / CARD_NAME).is_file():
            try:
                licence = ModelCard.load(folder / CARD_NAME, ignore_metadata_errors=True).data.get("license")
            except Exception:  # a malformed card says nothing about the licence
                licence = None
            if isinstance(licence, str) and licence:
                return licence
    return None


def render_rewire_section(record: Mapping[str, Any]) -> str:
    """The Markdown of the rewiring section, from the ``rewire_config.json`` record."""
    config, base, cloze, training = record["config"], record["base_model"], record["cloze"], record["training"]
    layers = (f"first {base['layers_used']} of {base['layers_total']} (the last "
              f"{base['layers_total'] - base['layers_used']} chopped off)"
              if base["layers_used"] != base["layers_total"] else f"all {base['layers_total']}")
    corpus_rows = []
    for item in record["corpus"]:
        if "sha256" in item:
            corpus_rows.append(f"`{item['name']}` ({item['lines']:,} lines, sha256 `{item['sha256']}`)")
        else:
            corpus_rows.append(f"dataset `{item['dataset']}` column `{item['column']}` ({item['rows']:,} rows, "
                               f"fingerprint `{item.get('fingerprint')}`)")
    skipped = (f"; {cloze['skipped_short']:,} lines too short to mask were left out" if cloze["skipped_short"] else "")
    if cloze.get("empty_answers"):
        skipped += (f"; {cloze['empty_answers']:,} answers are empty or blank (double spaces in the corpus are "
                    f"empty words under the reference rule)")
    if cloze.get("mask_truncated"):
        skipped += (f"; {cloze['mask_truncated']:,} queries lose their mask token beyond the max length of "
                    f"{cloze['max_length']} tokens and train without it, as in the reference")
    sampled = (f" (a random sample of {cloze['sentences']:,} of {cloze['sampled_from']:,} lines)"
               if cloze.get("sampled_from") else "")
    checkpoints = training.get("checkpoints") or []
    final_loss = training.get("final_loss")
    rows = [
        ("Base model", f"`{base['name']}`"),
        ("Transformer layers", layers),
        ("Representation", "`[CLS]` of the last kept layer (pooling `cls`), cosine similarity in training"),
        ("Corpus", "<br>".join(corpus_rows) + sampled),
        ("Cloze pairs", f"{cloze['pairs']:,}{skipped}; mask token `{record['mask_token']}`, "
                        f"mask ratio {_fmt(config['mask_ratio'])}"),
        ("Steps", f"{training['global_step']:,} of {config['steps']:,}"
                  + (f" (resumed from `{training['resumed_from']}`)" if training.get("resumed_from") else "")),
        ("Final training loss", f"{final_loss:.4g}" if isinstance(final_loss, (int, float)) else "not recorded"),
        ("Checkpoints", (", ".join(f"`checkpoints/{name}`" for name in checkpoints) or "none")
         + f" (every {config['save_steps']} steps)"),
        ("Batch size", f"{config['batch_size']} pairs ({2 * config['batch_size']} texts; "
                       f"{training.get('world_size', 1)} device(s))"),
        ("Loss", f"InfoNCE over all 2N texts of a batch, temperature {_fmt(config['temperature'])} "
                 f"(scale {_fmt(1 / config['temperature'])})"),
        ("Learning rate / weight decay", f"{_fmt(config['learning_rate'])} / {_fmt(config['weight_decay'])} "
                                         f"(linear decay, {config['warmup_steps']} warm-up steps)"),
        ("Max length", f"{config['max_length']} tokens in rewiring, saved as the model's `max_seq_length`: "
                       f"`SentenceTransformer` cuts longer inputs at {config['max_length']} tokens unless "
                       "`model.max_seq_length` is raised (`medlama probe` sets its own lengths)"),
        ("Dropout", _fmt(config["dropout"])),
        ("Batches", config["batch_sampler"]),
        ("Precision", training.get("precision", "?")),
        ("Seed", str(config["seed"])),
    ]
    table = "\n".join(["| | |", "|:--|:--|", *(f"| {key} | {value} |" for key, value in rows)])
    lines = [
        _REWIRE_START,
        f"# Contrastive-Probe rewiring of `{base['name']}`",
        "",
        "This encoder was rewired for retrieval-based knowledge probing with Contrastive-Probe (Meng et al., "
        "ACL 2022): a short contrastive self-retrieval game on cloze queries made from corpus sentences, written "
        "by `medlama rewire`. Probe it with the `[CLS]` vector of its output.",
        "",
        table,
        "",
    ]
    if record.get("command"):
        lines += ["Reproduce (same corpus files):", "", "```bash", record["command"], "```", ""]
    lines += ["Everything needed to reproduce the run is in `rewire_config.json`.", _REWIRE_END]
    return "\n".join(lines)


def card_data(record: Mapping[str, Any]):
    """The card's YAML header (a ``ModelCardData``) for a run record, before any probing scores."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCardData

    # No ``datasets``: the Hub reads it as dataset repository ids, and a corpus is a local file (named in the
    # body's Corpus row). ``update_model_card_scores(dataset=...)`` adds the probed dataset's Hub id.
    data = ModelCardData(
        license=base_model_licence(record), language="en",
        base_model=base_model_id(record), library_name="sentence-transformers", pipeline_tag="sentence-similarity",
        tags=list(TAGS))
    # One sensible example for the Hub's sentence-similarity widget: a MedLAMA-style query and candidates.
    data.widget = [{"source_sentence": f"metformin might treat {record.get('mask_token') or '[MASK]'} .",
                    "sentences": ["type 2 diabetes mellitus", "hypertension", "asthma"]}]
    return data


def write_rewire_card(path: str | Path, record: Mapping[str, Any]) -> None:
    """Write ``path/README.md`` for a rewired model (module docstring), replacing any card there."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCard

    data = card_data(record)
    licence = (f"`{data.license}`, the licence of the base model `{record['base_model']['name']}`."
               if data.license else
               "Not recorded: the base model's card was not at hand, so no `license` is declared. The base "
               "model's licence applies to this derived model; add it to the YAML header before sharing.")
    versions = "\n".join(f"- {name}: {version}" for name, version in (record.get("versions") or {}).items())
    card = ModelCard.from_template(
        data, template_str=_TEMPLATE, rewire_section=render_rewire_section(record), placeholder=MODEL_ID_PLACEHOLDER,
        mask_token=record.get("mask_token") or "[MASK]", scores_section=f"{_SCORES_START}\n{_NO_SCORES}\n{_SCORES_END}",
        licence=licence, versions=versions or "- not recorded", citation=CITATION)
    atomic_write_text(Path(path) / CARD_NAME, str(card).rstrip("\n") + "\n")


def _flatten(scores: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in scores.items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def eval_results(flat: Mapping[str, float], *, dataset: str | None = None, config: str | None = None) -> list:
    """``EvalResult`` entries for flat scores such as ``{"MedLAMA hard acc@1": 4.49}``: the last word is
    the metric (``acc@k``, ``mrr``), the words before it name the query set (a part of one, ``(partial: ...)``,
    names the metric ``acc@k (partial)``); its config is ``config``, else ``hard`` or ``full`` when the name
    says so."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import EvalResult

    results = []
    for name, value in flat.items():
        label, _, metric = name.rpartition(" ")
        if not _METRIC.match(metric):
            label, metric = name, name
        words = re.split(r"[\s\[_]+", label.lower())
        set_config = config or next((word for word in words if word in ("hard", "full")), None)
        results.append(EvalResult(
            task_type=TASK_TYPE, task_name=TASK_NAME, dataset_type=dataset or "medlama",
            dataset_name=label if "medlama" in label.lower() else f"MedLAMA {label}".strip(),
            dataset_config=set_config, dataset_split="test", metric_type=metric.lower(),
            # a run of part of the set (``MedLAMA hard (partial: ...)``) says so where leaderboards show it
            metric_name=f"{metric} (partial)" if "(partial" in label else metric,
            metric_value=value))
    return results


def _model_name(folder: Path) -> str:
    """The ``model-index`` name of a local folder (push makes it the repository id): the rewired base model."""
    try:
        base = json.loads((folder / "rewire_config.json").read_text(encoding="utf-8"))["base_model"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return folder.resolve().name
    return f"{base} rewired with Contrastive-Probe"


def _checked_scores(scores: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(scores, Mapping) or not scores:
        raise MedlamaInputError("scores must be a non-empty mapping of names to numbers")
    flat = _flatten(scores)
    for name, value in flat.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise MedlamaInputError(f"score {name!r} is not a finite number: {value!r}")
    return flat


def card_with_scores(text: str, scores: Mapping[str, Any], *, model_name: str, source: str | None = None,
                     checkpoint: str | None = None, dataset: str | None = None, config: str | None = None,
                     where: str | Path | None = None) -> str:
    """The card ``text`` with ``scores`` as its ``model-index`` and "Probing scores" table (replacing any there);
    arguments as :func:`update_model_card_scores`, ``model_name`` the ``model-index`` name when the card has
    none, ``where`` the card's file for error messages."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCard

    flat = _checked_scores(scores)
    try:
        card = ModelCard(text, ignore_metadata_errors=True)
    except Exception as error:  # a card that does not parse: say where
        raise MedlamaInputError(f"cannot read the model card: {error}", file=where) from None
    card.data.eval_results = eval_results(flat, dataset=dataset, config=config)
    card.data.model_name = card.data.model_name or model_name
    if dataset:
        card.data.datasets = [*[d for d in card.data.datasets or [] if d != dataset], dataset]
    lines = [_SCORES_START]
    if source or checkpoint:
        lines.append(" ".join(part for part in (f"Probed on {source}." if source else "",
                                                f"Checkpoint: `{checkpoint}`." if checkpoint else "") if part))
        lines.append("")
    lines += ["| metric | score |", "|:--|--:|", *(f"| {name} | {value:g} |" for name, value in flat.items()),
              _SCORES_END]
    block = "\n".join(lines)
    replaced = _replace_block(card.text, _SCORES_START, _SCORES_END, block)
    card.text = replaced if replaced is not None else card.text.rstrip("\n") + f"\n\n## Probing scores\n\n{block}\n"
    return str(card).rstrip("\n") + "\n"


def scores_record(scores: Mapping[str, Any], *, source: str | None = None, checkpoint: str | None = None,
                  dataset: str | None = None, config: str | None = None) -> str:
    """The text of ``probing_scores.json`` for those scores."""
    return json.dumps({"scores": _checked_scores(scores), "source": source, "checkpoint": checkpoint,
                       "dataset": dataset, "config": config}, indent=2) + "\n"


def update_model_card_scores(path: str | Path, scores: Mapping[str, Any], *, source: str | None = None,
                             checkpoint: str | None = None, dataset: str | None = None,
                             config: str | None = None) -> Path:
    """Record probing scores in a rewired model folder: its card's ``model-index`` (``EvalResult`` entries,
    :func:`eval_results`), its "Probing scores" table and ``probing_scores.json``. Calling it again replaces them.

    ``scores``: ``{"hard acc@1": 4.49, ...}`` or nested, e.g. ``{"hard": {"acc@1": 4.49, "acc@10": 21.7}}``
    (numbers are recorded as given; percentages are the caller's choice). ``source`` says what was probed
    (e.g. ``"MedLAMA hard set, 15,329 queries"``), ``checkpoint`` which checkpoint if not the final model,
    ``dataset`` the MedLAMA dataset's Hub id (also added to the card's ``datasets``), ``config`` its config.
    ``medlama push-model --results`` puts a probe's scores into the pushed card instead (the folder unchanged).
    """
    folder = Path(path)
    card_path = folder / CARD_NAME
    if not card_path.is_file():
        raise MedlamaInputError("no README.md: not a model folder written by medlama rewire", file=folder)
    _checked_scores(scores)
    text = card_with_scores(card_path.read_text(encoding="utf-8"), scores, model_name=_model_name(folder),
                            source=source, checkpoint=checkpoint, dataset=dataset, config=config, where=card_path)
    atomic_write_text(card_path, text)
    atomic_write_text(folder / SCORES_NAME, scores_record(scores, source=source, checkpoint=checkpoint,
                                                          dataset=dataset, config=config))

    record_again(folder, [CARD_NAME, SCORES_NAME])  # medlama's own edit: push-model still vouches for them
    return card_path


def card_for_repo(text: str, repo_id: str, revision: str | None = None, *, checkpoints: bool = False) -> str:
    """The card ``text`` as pushed to ``repo_id`` (at ``revision``): the usage names the repository, the
    ``model-index`` is the repository's, and a sentence-transformers training card loses the ``widget``
    examples it cut from the training pairs. ``checkpoints``: whether the upload holds the ``checkpoints/``
    folder; without it, the Checkpoints row says they stayed with the local copy instead of listing folders
    the repository does not have. The YAML is rewritten only when its metadata changes."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCard

    load = f'SentenceTransformer("{repo_id}"' + (f", revision={revision!r})" if revision else ")")
    text = _USAGE_LINE.sub(load, text).replace(MODEL_ID_PLACEHOLDER, repo_id)
    if not checkpoints:
        text = _CHECKPOINTS_ROW.sub(_checkpoints_left_out, text)
    try:
        card = ModelCard(text, ignore_metadata_errors=True)
    except Exception:  # not a card the Hub could read either: leave its metadata alone
        return text
    changed = False
    if card.data.eval_results and card.data.model_name != repo_id:
        card.data.model_name, changed = repo_id, True
    if "generated_from_trainer" in (card.data.tags or []) and card.data.get("widget"):
        card.data.widget, changed = None, True
    return str(card).rstrip("\n") + "\n" if changed else text


#: The card's Checkpoints row when it lists folders: ``| Checkpoints | `checkpoints/checkpoint-2`, ... (every N steps) |``.
_CHECKPOINTS_ROW = re.compile(r"^\| Checkpoints \| ((?:`checkpoints/[^`]+`(?:, )?)+) (\(every \d+ steps\)) \|$", re.M)


def _checkpoints_left_out(match: re.Match) -> str:
    count = match.group(1).count("`checkpoints/")
    return (f"| Checkpoints | {count} kept with the local copy, not in this repository {match.group(2)} "
            "(`medlama push-model --include-checkpoints` uploads them) |")


def checkpoint_card(repo_id: str, checkpoint: str, revision: str | None = None) -> str:
    """The card of a checkpoint folder (``checkpoints/checkpoint-<step>``) pushed inside ``repo_id``: where it
    comes from and how to load it (sentence-transformers' own checkpoint cards carry training-pair widgets and
    a placeholder id)."""
    # huggingface_hub loads when this runs, not when medlama.trainers.model_card is imported
    from huggingface_hub import ModelCard, ModelCardData

    folder = checkpoint.rstrip("/")
    step = folder.rsplit("-", 1)[-1]
    at = f", revision={revision!r}" if revision else ""
    data = ModelCardData(library_name="sentence-transformers", tags=["contrastive-probe", "medlama", "checkpoint"])
    body = (f"# Step {step} of [{repo_id}](https://huggingface.co/{repo_id})\n\n"
            f"A checkpoint of the Contrastive-Probe rewiring, kept for the performance-over-steps curve; "
            f"the final model is the repository's root. Load it with:\n\n```python\n"
            f"import os\n\nfrom huggingface_hub import snapshot_download\n"
            f"from sentence_transformers import SentenceTransformer\n\n"
            f"root = snapshot_download({repo_id!r}{at}, allow_patterns=[{folder + '/*'!r}])\n"
            f"model = SentenceTransformer(os.path.join(root, {folder!r}))\n```\n")
    return f"---\n{data.to_yaml()}\n---\n\n{body}"
