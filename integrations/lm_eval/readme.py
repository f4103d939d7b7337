"""The README of an exported lm-eval task folder, in lm-eval's task README format (paper, citation, groups and
tasks, what the metrics mean, how to run, the checklist), from what :mod:`medlama.integrations.lm_eval.tasks`
records of the export."""

from __future__ import annotations

import json
from collections.abc import Sequence
from medlama.dataset_cards import card_path

def medlama_citation() -> str:
    """The MedLAMA paper's BibTeX, as the dataset card (``dataset_cards/medlama.md``) cites it."""

    section = card_path("medlama").read_text(encoding="utf-8").split("## Citation", 1)[1]
    return section.split("```bibtex\n", 1)[1].split("```", 1)[0].strip()


def _data_line(data: dict) -> str:
    where = data.get("id") or "a local build"
    revision = f" at revision `{data['revision']}`" if data.get("revision") else ""
    return (f"`{where}`{revision} ({data.get('kind', 'folder')}; files SHA-256 `{data.get('sha256')}`, release commit "
            f"`{data.get('release_commit')}`)")


#: Where tasks exported with ``--few-shot-as-multiturn`` agree with medlama (both READMEs).
TURNS_AGREEMENT = """Tasks exported with `--few-shot-as-multiturn` render medlama's turns; lm-eval tokenises the rendered chat and
the reply's start as one string, medlama the template's part and the text before `[Y]` apart: the same ids where
the template's generation prompt ends at a token boundary (a newline or a special token, as in the common
templates) and the tokenizer marks no word start at the beginning of a text (byte-level BPE: GPT-2, Llama 3). A
SentencePiece tokenizer that does (Llama 2, Mistral) gives medlama's reply a word-start mark the joined string
has only after a space, so other numbers."""


def run_flags(settings: dict) -> str:
    """The lm_eval flags that render the prompts as the export was written for: a chat template, its system
    message and the few-shot examples as chat turns."""
    system = settings.get("system_prompt")
    turns = settings.get("few_shot_as_multiturn")
    if not (system or turns):
        return ""
    # lm-eval turns --fewshot_as_multiturn on by itself with --apply_chat_template: examples written as one text
    # (a system message without chat turns) must say false, or lm-eval would read them as turns, other numbers
    multiturn = " --fewshot_as_multiturn" if turns else " --fewshot_as_multiturn false" * bool(settings.get("few_shot"))
    return " --apply_chat_template" + multiturn + (f" --system_instruction {json.dumps(system)}" if system else "")


def _few_shot_note(settings: dict) -> str:
    """The README's paragraph on the exported few-shot draw (none without one)."""
    shots = settings.get("few_shot") or 0
    if not shots:
        return ""
    turns = settings.get("few_shot_as_multiturn")
    probe = f"--few-shot {shots} --few-shot-seed {settings.get('few_shot_seed', 0)}"
    shown = "separated by blank lines"
    if turns:
        probe = f"--chat-template {probe} --few-shot-as-multiturn"
        shown = """as chat turns (run with `--apply_chat_template --fewshot_as_multiturn`): each example a user
  turn (medlama's chat instruction around its query) and an assistant turn (its sentence, first gold name filled
  in), then the query as the last user turn, the assistant's reply started with its text before `[Y]`
  (`gen_prefix`), each candidate its continuation"""
    return f"""
* Few-shot: every task reads each query after {shots} examples (`num_fewshot: {shots}`), filled prompts of other
  queries of its relation, never the query nor one with its subject, {shown}: the examples and prompts of
  `medlama probe {probe}` (each document's `fewshot` ids, handed to lm-eval by the tasks' sampler
  `utils.DrawnExamples`). Another `--num_fewshot` is refused: export again with that number."""


def render_readme(record: dict, exported: Sequence) -> str:
    """The task folder's README.md."""
    settings = record["settings"]
    config = settings["config"]
    group, gen = record["group"], record["generation_task"]
    rows = "\n".join(f"| `{item.task}` | {item.queries:,} | {item.pool:,} | {item.queries * item.pool:,} |"
                     for item in exported)
    total_q = sum(item.queries for item in exported)
    chat, few_shot = run_flags(settings), _few_shot_note(settings)
    return f"""# MedLAMA ({config})

### Paper

Title: `Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models`

Abstract: https://arxiv.org/abs/2110.08173

MedLAMA is a biomedical knowledge probing benchmark built from UMLS triples: 19 relations, each query a cloze
sentence about a head entity (`[X] might treat [Y] .`) whose gold answers are the names of the tail entities.
The `hard` set keeps the queries whose answers cannot be read off the head's name (little token overlap).
A model is scored by acc@k: whether a gold name is among its k best-ranked candidates.

Homepage: https://github.com/cambridgeltl/medlama

These task files were written by `medlama export lm-eval` (medlama {record['medlama_version']}, task version
{record['task_version']}) from {_data_line(record['data'])}, prompt column `{settings['prompt_column']}`.
`medlama_export.json` records the export.

### Citation

```
{medlama_citation()}
```

### Groups and Tasks

#### Groups

* `{group}`: the {len(exported)} relation tasks below; it reports `acc@1` and `acc@10` over all queries (each
  relation weighted by its number of queries, *micro*) and `acc@1_macro` and `acc@10_macro`, the unweighted
  mean of the relations' values (*macro*). MedLAMA reports both.

#### Tasks

* One task per relation, `medlama_{config}_<relation>`: every query is ranked by log-likelihood
  against its relation's whole candidate pool (the head and answer names of that relation's queries; a
  relation's score does not depend on which other relations run). The context is the query's text before
  `[Y]`; each candidate is scored as the continuation `" " + name + text after [Y]` (e.g. `" aspirin ."`),
  the sum of its tokens' log-probabilities, exactly as `medlama probe --method causal-likelihood --candidates
  relation` scores it. Candidates with equal scores keep the pool's order.
* `{gen}`: free generation over all {total_q:,} queries. The model continues the context greedily (at most
  {settings['max_gen_toks']} tokens, stopping at the text after `[Y]` or EOS); `acc@1` is 1 when the answer
  matches a gold name after normalisation (lower case, punctuation and the articles a/an/the removed,
  whitespace collapsed), `acc@1_macro` its mean over relations. It is `medlama probe --method causal-generate
  --num-beams 1 --raw-predictions --match normalized`'s acc@1.

| task | queries | pool | log-likelihood requests |
|---|---:|---:|---:|
{rows}
| **`{group}`** | **{total_q:,}** | | **{record['loglikelihood_requests']:,}** |
{few_shot}

### Cost

Ranking runs one log-likelihood request per query and candidate: {record['loglikelihood_requests']:,} requests
for the whole group (the table above), each a forward pass over a prompt and one name (lm-eval runs every
request's whole text). Use `--limit N` (the first N
queries of every relation) for a quick look: its numbers are not the benchmark's. For a large model, medlama's
`causal-likelihood` computes the same scores running each prompt once (its KV cache serves every candidate).

### How to run

```bash
lm_eval --model hf --model_args pretrained=gpt2 --include_path TASKS --tasks {group}{chat}
lm_eval --model hf --model_args pretrained=gpt2 --include_path TASKS --tasks {gen}{chat}
```

### Agreement with medlama, and where it ends

lm-eval tokenises context + continuation as one string and splits it where the context's tokens end; medlama
tokenises the name and the text after the slot as they read after a word. For tokenizers that split words at
spaces (GPT-2's byte-level BPE, SentencePiece as in Llama) both give the same token ids, so the same scores.
They can differ when a query and its longest candidate exceed the model's positions (lm-eval cuts each
candidate's context on its own, medlama a query's once, for its longest candidate), on near-ties (lm-eval sums
float32 log-probabilities, medlama float64), and with `--apply_chat_template` on tasks exported without
`--few-shot-as-multiturn` (medlama's `--chat-template` wraps the query in its own instruction). {TURNS_AGREEMENT}
The generation task stops where the decoded text reaches the text
after `[Y]` (` .`), medlama's `causal-generate` at that text's first token: the same answer unless the model
glues it to another character in one token (`" .5"`).

### Checklist

For adding novel benchmarks/datasets to the library:
* [x] Is the task an existing benchmark in the literature?
  * [x] Have you referenced the original paper that introduced the task?
  * [x] If yes, does the original paper provide a reference implementation? If so, have you checked against the
    reference implementation and documented how to run such a test?
    (medlama's test runs these tasks with lm-eval and `medlama probe` on the same queries and compares acc@1
    and acc@10.)

If other tasks on this dataset are already supported:
* [x] Is the "Main" variant of this task clearly denoted? (`{group}`)
* [x] Have you provided a short sentence in a README on what each new variant adds / evaluates?
* [x] Have you noted which, if any, published evaluation setups are matched by this variant?
"""


def render_mc_readme(record: dict, exported: Sequence) -> str:
    """The README of an exported multiple-choice config (``hard_mc``, ``full_mc``)."""
    settings = record["settings"]
    config, group = settings["config"], record["group"]
    rows = "\n".join(f"| `{item.task}` | {item.queries:,} | {item.pool:,} |" for item in exported)
    chance = record["candidates"]["chance_level"]
    return f"""# MedLAMA ({config}, multiple choice)

### Paper

Title: `Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models`

Abstract: https://arxiv.org/abs/2110.08173

MedLAMA is a biomedical knowledge probing benchmark built from UMLS triples: 19 relations, each query a cloze
sentence about a head entity (`[X] might treat [Y] .`) whose gold answers are the names of the tail entities.
In this multiple-choice variant each query offers its first gold answer and distractors drawn from its
relation's candidate pool, none of them a gold answer of the query (the folder's card gives the number, the
seed and the draw rule).

Homepage: https://github.com/cambridgeltl/medlama

These task files were written by `medlama export lm-eval` (medlama {record['medlama_version']}, task version
{record['task_version']}) from {_data_line(record['data'])}, prompt column `{settings['prompt_column']}`.
`medlama_export.json` records the export (the choices' SHA-256 under `candidates`).

### Citation

```
{medlama_citation()}
```

### Groups and Tasks

* `{group}`: the {len(exported)} relation tasks below, `acc` and `acc_norm` over all queries (each relation
  weighted by its number of queries). Chance level (a uniform guess's `acc`): {100 * chance:.2f}%.
* One `multiple_choice` task per relation, `medlama_{config}_<relation>`: the context is the query's text
  before `[Y]`; each choice is scored as the continuation `" " + name + text after [Y]` (e.g. `" aspirin ."`),
  the sum of its tokens' log-probabilities. `acc` is lm-eval's own (the best-scored choice is the gold), equal
  to `medlama probe --config {config} --method causal-likelihood`'s acc@1; `acc_norm` divides each score by the
  continuation's length in characters first (lm-eval's own normalisation, which medlama does not compute).
{_few_shot_note(settings)}

| task | queries | choices per query |
|---|---:|---:|
{rows}

### How to run

```bash
lm_eval --model hf --model_args pretrained=gpt2 --include_path TASKS --tasks {group}{run_flags(settings)}
```

### Agreement with medlama, and where it ends

As for the ranking tasks: the same token ids for tokenizers that split words at spaces (GPT-2's byte-level BPE,
SentencePiece), so the same scores, except past the model's positions, on near-ties (lm-eval sums float32
log-probabilities, medlama float64) and with `--apply_chat_template` on tasks exported without
`--few-shot-as-multiturn` (medlama's `--chat-template` wraps the query in its own instruction). {TURNS_AGREEMENT}
"""
