"""The rewiring section of a rewired model's README.md, and probing scores added to it later.

sentence-transformers writes a generic model card (architecture, loss, training arguments, logs). This
module puts a Contrastive-Probe section right after its YAML header: base model, layers kept, corpus (file
names, SHA-256, line counts), cloze pairs, steps and checkpoints, hyperparameters, seed, and a command that
reproduces the run; and a "Probing scores" section that :func:`update_model_card_scores` fills in once the
model has been probed. Both sections sit between HTML comment markers so they can be rewritten in place.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medlama.atomic import atomic_write_text
from medlama.errors import MedlamaInputError

CARD_NAME = "README.md"
SCORES_NAME = "probing_scores.json"

_REWIRE_START, _REWIRE_END = "<!-- medlama:rewire:start -->", "<!-- medlama:rewire:end -->"
_SCORES_START, _SCORES_END = "<!-- medlama:scores:start -->", "<!-- medlama:scores:end -->"
_NO_SCORES = ("Not measured yet. Add them with "
              "`medlama.trainers.model_card.update_model_card_scores(path, scores)`.")

CITATION = """@inproceedings{meng-etal-2022-rewire,
    title = "Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models",
    author = "Meng, Zaiqiao and Liu, Fangyu and Shareghi, Ehsan and Su, Yixuan and Collins, Charlotte and
      Collier, Nigel",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics",
    year = "2022",
}"""


def _split_front_matter(text: str) -> tuple[str, str]:
    """(YAML header including its closing ``---`` line, rest)."""
    match = re.match(r"\A---\n.*?\n---\n", text, flags=re.S)
    if not match:
        return "", text
    return match.group(0), text[match.end():]


def _replace_block(text: str, start: str, end: str, block: str) -> str | None:
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        return None
    return text[:i] + block + text[j + len(end):]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "model default"
    return str(value)


def render_rewire_section(record: Mapping[str, Any]) -> str:
    """The Markdown of the rewiring section, from the ``rewire_config.json`` record."""
    config = record["config"]
    base = record["base_model"]
    cloze = record["cloze"]
    training = record["training"]
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
    sampled = (f" (a random sample of {cloze['sentences']:,} of {cloze['sampled_from']:,} lines)"
               if cloze.get("sampled_from") else "")
    checkpoints = training.get("checkpoints") or []
    rows = [
        ("Base model", f"`{base['name']}`"),
        ("Transformer layers", layers),
        ("Representation", "`[CLS]` of the last kept layer (pooling `cls`), cosine similarity in training"),
        ("Corpus", "<br>".join(corpus_rows) + sampled),
        ("Cloze pairs", f"{cloze['pairs']:,}{skipped}; mask token `{record['mask_token']}`, "
                        f"mask ratio {_fmt(config['mask_ratio'])}"),
        ("Steps", f"{training['global_step']:,} of {config['steps']:,}"
                  + (f" (resumed from `{training['resumed_from']}`)" if training.get("resumed_from") else "")),
        ("Checkpoints", (", ".join(f"`checkpoints/{name}`" for name in checkpoints) or "none")
         + f" (every {config['save_steps']} steps)"),
        ("Batch size", f"{config['batch_size']} pairs ({2 * config['batch_size']} texts; "
                       f"{training.get('world_size', 1)} device(s))"),
        ("Loss", f"InfoNCE over all 2N texts of a batch, temperature {_fmt(config['temperature'])} "
                 f"(scale {_fmt(1 / config['temperature'])})"),
        ("Learning rate / weight decay", f"{_fmt(config['learning_rate'])} / {_fmt(config['weight_decay'])} "
                                         f"(linear decay, {config['warmup_steps']} warm-up steps)"),
        ("Max length", f"{config['max_length']} tokens"),
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
    lines += ["Everything needed to reproduce the run is in `rewire_config.json`.", "",
              "```bibtex", CITATION, "```", _REWIRE_END]
    return "\n".join(lines)


def write_rewire_card(path: str | Path, record: Mapping[str, Any]) -> None:
    """Put (or replace) the rewiring section and an empty scores section in ``path/README.md``."""
    card = Path(path) / CARD_NAME
    text = card.read_text(encoding="utf-8") if card.exists() else ""
    section = render_rewire_section(record)
    replaced = _replace_block(text, _REWIRE_START, _REWIRE_END, section)
    if replaced is None:
        header, body = _split_front_matter(text)
        scores = f"## Probing scores\n\n{_SCORES_START}\n{_NO_SCORES}\n{_SCORES_END}"
        replaced = f"{header}\n{section}\n\n{scores}\n\n{body.lstrip()}"
    atomic_write_text(card, replaced)


def _flatten(scores: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in scores.items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def update_model_card_scores(path: str | Path, scores: Mapping[str, Any], *, source: str | None = None,
                             checkpoint: str | None = None) -> Path:
    """Record probing scores in a rewired model folder: its README's "Probing scores" section and
    ``probing_scores.json``. Calling it again replaces them.

    ``scores``: ``{"hard acc@1": 4.49, ...}`` or nested, e.g. ``{"hard": {"acc@1": 4.49, "acc@10": 21.7}}``
    (numbers are shown as given; percentages are the caller's choice). ``source`` says what was probed (e.g.
    ``"MedLAMA hard set, 15,329 queries"``), ``checkpoint`` which checkpoint if not the final model.
    """
    folder = Path(path)
    card = folder / CARD_NAME
    if not card.is_file():
        raise MedlamaInputError("no README.md: not a model folder written by medlama rewire", file=folder)
    if not isinstance(scores, Mapping) or not scores:
        raise MedlamaInputError("scores must be a non-empty mapping of names to numbers")
    flat = _flatten(scores)
    for name, value in flat.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise MedlamaInputError(f"score {name!r} is not a finite number: {value!r}")
    lines = [_SCORES_START]
    if source or checkpoint:
        lines.append(" ".join(part for part in (f"Probed on {source}." if source else "",
                                                f"Checkpoint: `{checkpoint}`." if checkpoint else "") if part))
        lines.append("")
    lines += ["| metric | score |", "|:--|--:|", *(f"| {name} | {value:g} |" for name, value in flat.items()),
              _SCORES_END]
    block = "\n".join(lines)
    text = card.read_text(encoding="utf-8")
    replaced = _replace_block(text, _SCORES_START, _SCORES_END, block)
    if replaced is None:
        replaced = text.rstrip("\n") + f"\n\n## Probing scores\n\n{block}\n"
    atomic_write_text(card, replaced)
    atomic_write_text(folder / SCORES_NAME, json.dumps(
        {"scores": flat, "source": source, "checkpoint": checkpoint}, indent=2) + "\n")
    return card
