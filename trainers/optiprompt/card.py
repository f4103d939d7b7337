"""The model card (``README.md``) of a prompts folder of ``medlama optiprompt``: base model, relations,
settings and dev scores, so the prompts can be pushed to the Hub and probed from there
(``medlama probe --method mask-predict --model BASE --prompts you/repo``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _base_name(base: Mapping[str, Any]) -> str:
    model = base.get("model") or {}
    return str(model.get("id") or model.get("name") or "?")


def prompts_card(record: Mapping[str, Any]) -> str:
    """The card's Markdown, made from the folder's record (``prompts.json``)."""
    base = record["base"]
    name = _base_name(base)
    hub = (base.get("model") or {}).get("id")
    header = ["---", "library_name: medlama", "tags:", "- optiprompt", "- biolama", "- knowledge-probing"]
    if hub:
        header += [f"base_model: {hub}"]
    header += ["---", ""]
    training, decoding = record["training"], record["decoding"]
    defaults = {"max_masks": 10, "beam_size": 5, "init": "confidence", "refine": "none", "max_iterations": 10}
    flags = "".join(f" --{key.replace('_', '-')} {decoding[key]}" for key, value in defaults.items()
                    if decoding.get(key, value) != value)  # the dev decoding, for the test
    rows = [f"| {rel} | `{item['template']}` | {100 * item['manual_dev_acc@1']:.2f} | "
            f"{100 * item['dev_acc@1']:.2f} | {item['best_epoch']} | {item['train_examples']} |"
            for rel, item in sorted(record["relations"].items())]
    body = [
        f"# OptiPrompt prompts for {name}",
        "",
        "Learned prompt vectors (OptiPrompt, Zhong et al. 2021, as BioLAMA trains them) for each relation below, "
        f"trained with `medlama optiprompt` on the `{training['train_split']}` split and chosen on "
        f"`{training['dev_split']}` by acc@1 of mask-predict decoding. They only mean something to the base "
        "model they were trained with: `medlama probe` refuses another model (weights or config) or tokenizer, and a "
        "probe of facts they were trained on (another build's test split) unless told to record it.",
        "",
        f"- base model: {name} (weights SHA-256 `{base['model_sha256']}`, config SHA-256 "
        f"`{base['config_sha256']}`, tokenizer SHA-256 `{base['tokenizer_sha256']}`)",
        f"- prompts identity: `{record.get('identity', '?')}`",
        *(f"- {item['split']} split (the prompts were {role} on it): {item['rows']} rows, SHA-256 `{item['sha256']}`"
          for role, item in (("trained", record["training_data"]["train"]),
                             ("selected", record["training_data"]["dev"]))),
        f"- training: {json.dumps(training)}",
        f"- decoding: {json.dumps(decoding)}",
        "",
        "| relation | learned template | manual dev acc@1 (%) | learned dev acc@1 (%) | epoch kept | train pairs |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "## Use",
        "",
        "```bash",
        f"medlama probe --dataset biolama --data BIOLAMA --method mask-predict --model {name} --prompts THIS_FOLDER "
        f"--preset biolama{flags}",
        "```",
        "",
    ]
    return "\n".join(header + body)
