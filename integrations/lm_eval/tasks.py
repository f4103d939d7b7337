"""MedLAMA as lm-evaluation-harness tasks: ``medlama export lm-eval [--data DIR_OR_HUB_ID] --out TASKS``.

:func:`export_lm_eval` writes a folder that ``lm_eval --include_path TASKS`` (or ``TaskManager(include_path=
TASKS)``) reads, with no medlama code needed to run it:

* ``medlama_<config>_<relation>`` per relation: log-likelihood ranking (``multiple_choice``) of the relation's
  own candidate pool (medlama's ``relation`` rule: the folder's ``candidates_<config>_<relation>``), metrics
  ``acc@1`` and ``acc@10``, equal to ``medlama probe --method causal-likelihood --candidates relation`` (sum
  reduction) on the same queries;
* ``medlama_<config>``, the group of those tasks: ``acc@k`` micro (weighted by relation size) and
  ``acc@k_macro`` (the unweighted mean of the relations'), as MedLAMA reports both;
* ``medlama_<config>_gen``: greedy generation, scored by normalised match of the answer against the gold
  names (``acc@1`` and ``acc@1_macro``);
* the queries and pools as JSON files in ``data/`` (lm-eval runs offline, whatever ``--data`` was: a built
  folder, a dry run, a gated Hub dataset fetched here with the user's token, or the cached build), the task functions
  (``utils.py``, a copy of :mod:`medlama.integrations.lm_eval.task_utils`), a README in lm-eval's task format,
  and ``medlama_export.json``: what was exported from which data (``--data``'s identity, as ``medlama probe``
  records it).

How a query becomes a request is medlama's causal cut (:meth:`medlama.probers.causal.scoring.CausalLM.split`):
the context is the text before ``[Y]`` (trailing spaces removed), each choice is the slot's space, the name and
the text after ``[Y]``. lm-eval tokenises context + choice as one string and splits it at the context's length;
medlama tokenises the name and the suffix as they read after a word: the same token ids for tokenizers that
split words at spaces (GPT-2's byte-level BPE, SentencePiece), which the export's test checks end to end.
Where the two cannot agree is written in the task README: a query longer than the model's positions (lm-eval
cuts each candidate's context on its own, medlama the query's once) and near-ties (lm-eval sums float32
log-probabilities, medlama float64).

A multiple-choice config (``--config hard_mc`` / ``full_mc``) is written as lm-eval's own ``multiple_choice``
tasks instead: ``medlama_<config>_<relation>`` per relation, each query's choices as its ``doc_to_choice`` (cut
as above) and ``label`` as its target, lm-eval's ``acc`` and ``acc_norm`` as metrics (no task code of
medlama's); the group ``medlama_<config>`` reports them over all queries. Its ``acc`` is medlama's acc@1 of
``medlama probe --config hard_mc --method causal-likelihood`` (sum reduction): the argmax of the same sums
(a choice is never another gold answer, so the drawn gold is the only hit), ties to the first choice as both
break them. No generation task is written for it. With ``--few-shot N`` each query is read after the examples
``medlama probe --config hard_mc --few-shot N`` draws, as for the ranking tasks; with ``--few-shot-as-multiturn``
too, after them as chat turns (each document's ``chat_query`` and ``chat_answer``, the query's ``context`` the
assistant's ``gen_prefix``), as ``medlama probe --chat-template --few-shot-as-multiturn`` reads it, for lm-eval's
``--apply_chat_template --fewshot_as_multiturn``.
"""

from __future__ import annotations

from importlib.metadata import version  # the distribution's version: `medlama` itself sits above this layer

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import Checked, as_dict, setting
from medlama.core.atomic import atomic_directory, check_replaceable
from medlama.datasets.choices import is_mc, ranking_config
from medlama.datasets.folders import folder_configs
from medlama.integrations.lm_eval.readme import render_mc_readme, render_readme
from medlama.probers.causal.chat import user_message
from medlama.probers.causal.fewshot import DELIMITER, draw, filled
from medlama.runs.arguments import check_relations
from medlama.runs.benchmarks import resolve_data
from medlama.runs.queries import QuerySource, load_medlama_queries
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN, PROMPT_COLUMNS

#: Who writes a task folder (its ownership record) and the file every one holds.
KIND = "export lm-eval"
MARKER = "medlama_export.json"
#: The version of the exported tasks (lm-eval's ``metadata.version``): raised when what they compute changes.
TASK_VERSION = 1.0
UTILS = Path(__file__).with_name("task_utils.py")


@dataclass(frozen=True)
class LmEvalExportSettings(Checked):
    """What is exported: the query set, its relations, the prompt, the generation budget."""

    config: Literal["hard", "full", "hard_mc", "full_mc"] = setting(
        "hard", help="MedLAMA query set to export (hard_mc, full_mc: the multiple-choice configs, as lm-eval "
                     "multiple_choice tasks with acc and acc_norm)")
    relations: tuple[str, ...] | None = setting(None, help="export only these relations (none: all)",
                                                metavar="REL")
    prompt_column: str = setting(
        DEFAULT_PROMPT_COLUMN, choices=PROMPT_COLUMNS, help="which prompt builds the query (the human prompt, as the reference)")
    max_gen_toks: int = setting(16, help="most tokens generated per answer by the _gen task (medlama "
                                         "causal-generate's --max-answer-tokens)", min=1, metavar="N")
    few_shot: int = setting(0, min=0, metavar="N", help="lm-eval's num_fewshot: each query read after N examples, "
                                                        "drawn as medlama probe --few-shot draws them (written into "
                                                        "each document, read by the tasks' sampler)")
    few_shot_seed: int = setting(0, metavar="S", help="the seed of the few-shot draw (medlama's --few-shot-seed)")
    few_shot_as_multiturn: bool = setting(
        False, help="the tasks as medlama probe --chat-template --few-shot-as-multiturn reads them: each example "
                    "a user and an assistant turn (run with lm_eval --apply_chat_template --fewshot_as_multiturn)")
    system_prompt: str | None = setting(None, metavar="TEXT", help="recorded, and put in the README's lm_eval "
                                                                   "command (--system_instruction, with "
                                                                   "--apply_chat_template): lm-eval takes it there")


    def __post_init__(self) -> None:
        super().__post_init__()
        if self.few_shot_as_multiturn and not self.few_shot:
            raise MedlamaInputError("few_shot_as_multiturn makes few-shot examples chat turns: give few_shot N >= 1 "
                                    "(--few-shot N) too")


@dataclass(frozen=True)
class RelationExport:
    """One exported relation: its task name, queries and pool size."""

    relation: str
    task: str
    queries: int
    pool: int


def _cut(text: str, query_id: str) -> tuple[str, str, str]:
    """``(context, delimiter, suffix)`` of a query, cut at its slot as ``causal-likelihood`` cuts it."""
    if text.count(MASK_PLACEHOLDER) != 1:
        raise MedlamaInputError(f"query {query_id!r} has {text.count(MASK_PLACEHOLDER)} {MASK_PLACEHOLDER} slots, "
                                f"needs exactly one: {text!r}")
    left, right = text.split(MASK_PLACEHOLDER)
    # A slot after a space reads " name" (one space, however many the prompt had); glued or opening: "name".
    delimiter = " " if left.strip() and left[-1:].isspace() else ""
    return left.rstrip(), delimiter, right


def _chat_fields(text: str, gold) -> dict[str, str]:
    """A document's chat turns as medlama renders them (``few_shot_as_multiturn``): ``chat_query``, the user
    message, and ``chat_answer``, the sentence with its first gold name in the slot (an example's assistant turn)."""
    return {"chat_query": user_message(text), "chat_answer": filled(text, gold[0])}


def _docs(queries, config: str, turns: bool = False) -> dict[str, list[dict]]:
    """Per relation, the lm-eval documents of its queries, in query order (with ``turns``, their chat turns)."""
    index = {relation: {name: i for i, name in reversed(list(enumerate(names)))}
             for relation, names in queries.pools.items()}
    out: dict[str, list[dict]] = {}
    for query_id, relation, text, gold in zip(queries.ids, queries.relations, queries.texts, queries.gold):
        context, delimiter, suffix = _cut(text, query_id)
        target = sorted({index[relation][name] for name in gold if name in index[relation]})
        out.setdefault(relation, []).append({
            "id": query_id, "config": config, "relation": relation, "query": text, "context": context,
            "delimiter": delimiter, "suffix": suffix, "answers": list(gold), "target": target,
            **(_chat_fields(text, gold) if turns else {})})
    return out


def _with_examples(docs: dict[str, list[dict]], queries, settings: "LmEvalExportSettings") -> None:
    """Each document's few-shot example ids (``fewshot``), drawn as ``medlama probe --few-shot`` draws them
    (:func:`medlama.probers.causal.fewshot.draw`) from the same queries, for the tasks' sampler to read."""
    if not settings.few_shot:
        return
    drawn = dict(zip(queries.ids, draw(queries, settings.few_shot, settings.few_shot_seed)))
    for rows in docs.values():
        for doc in rows:
            doc["fewshot"] = list(drawn[doc["id"]])


def _few_shot_yaml(shots: int, turns: bool = False) -> str:
    """The few-shot block of a task: ``num_fewshot`` and its examples from the task's own documents (its test
    split), each the sampler's pick (the ids drawn at export), shown filled: context, then the slot's space,
    first gold name and text after the slot, examples and query separated by a blank line (medlama's
    ``DELIMITER``). ``turns`` (``few_shot_as_multiturn``): each example its user message and, as the
    assistant's turn, its filled sentence (no ``gen_prefix``)."""
    if not shots:
        return "num_fewshot: 0\n"
    text, target = ("chat_text", "chat_answer") if turns else ("doc_to_text", "fewshot_target")
    return (f"num_fewshot: {shots}\n"
            "fewshot_split: test\n"
            f"fewshot_delimiter: {_yaml(DELIMITER)}\n"
            "fewshot_config:\n"
            "  sampler: !function utils.DrawnExamples\n"
            f"  doc_to_text: !function utils.{text}\n"
            f"  doc_to_target: !function utils.{target}\n"
            "  doc_to_choice: null\n"
            f"{'  gen_prefix: null' + chr(10) if turns else ''}"
            "  target_delimiter: \"\"\n"
            f"  fewshot_delimiter: {_yaml(DELIMITER)}\n")


def _mc_docs(queries, config: str, turns: bool = False) -> dict[str, list[dict]]:
    """Per relation, the lm-eval documents of a multiple-choice query set: its choices and ``label``, the index of
    the one choice that is a gold answer (the draw leaves no other); with ``turns``, its chat turns too."""
    out: dict[str, list[dict]] = {}
    for query_id, relation, text, gold, choices in zip(queries.ids, queries.relations, queries.texts, queries.gold,
                                                       queries.choices):
        context, delimiter, suffix = _cut(text, query_id)
        labels = [i for i, name in enumerate(choices) if name in set(gold)]
        if len(labels) != 1:
            raise MedlamaInputError(f"query {query_id!r}: {len(labels)} of its choices are gold answers, a "
                                    "multiple-choice query needs exactly one; rebuild the folder with `medlama build`")
        out.setdefault(relation, []).append({
            "id": query_id, "config": config, "relation": relation, "query": text, "context": context,
            "delimiter": delimiter, "suffix": suffix, "answers": list(gold), "choices": list(choices),
            "label": labels[0], **(_chat_fields(text, gold) if turns else {})})
    return out


def _mc_group_yaml(config: str, tasks: Sequence[str], version_meta: str) -> str:
    listed = "".join(f"  - {_yaml(task)}\n" for task in tasks)
    aggregate = "".join(f"  - metric: {name}\n    aggregation: mean\n    weight_by_size: true\n"
                        for name in ("acc", "acc_norm"))
    return (f"group: medlama_{config}\n"
            f"group_alias: {_yaml(f'MedLAMA {config} (multiple choice)')}\n"
            f"task:\n{listed}"
            "# over all queries (each relation weighted by its size)\n"
            f"aggregate_metric_list:\n{aggregate}"
            f"{version_meta}")


def _stops(docs: dict[str, list[dict]]) -> list[str]:
    """The generation task's stop sequences: each distinct text after the slot, trailing spaces removed (MedLAMA:
    `` .``, where medlama stops at its first token); lm-eval adds the model's EOS, as medlama stops at it too.
    No newline: medlama generates through one (and collapses the whitespace of the answer)."""
    return sorted({doc["suffix"].rstrip() for rows in docs.values() for doc in rows} - {""})


def _yaml(value) -> str:
    """A YAML scalar or flow list (JSON is YAML): strings quoted, so that no name is read as a number."""
    return json.dumps(value, ensure_ascii=False)


def _template(config: str, multiple_choice: bool = False, shots: int = 0, turns: bool = False) -> str:
    """The YAML every relation task of ``config`` includes: medlama's acc@k over the relation's pool, or (a
    ``multiple_choice`` config) each query's own choices and ``label``, scored by lm-eval's ``acc``/``acc_norm``.
    ``turns`` (``few_shot_as_multiturn``): the query is its user message, and the assistant's turn starts with
    its context (``gen_prefix``), the choices its continuation, as ``medlama probe --chat-template`` reads it."""
    names = ("acc", "acc_norm") if multiple_choice else ("acc@1", "acc@10", "acc@1_macro", "acc@10_macro")
    metrics = "".join(f"  - metric: \"{name}\"\n    aggregation: mean\n    higher_is_better: true\n" for name in names)
    choices, target, results = (("doc_to_choices", "label", "") if multiple_choice else
                                ("doc_to_choice", "!function utils.doc_to_target",
                                 "process_results: !function utils.process_results\n"))
    return (f"# Shared by the medlama_{config}_<relation> tasks (written by `medlama export lm-eval`).\n"
            "dataset_path: \"\"\n"
            "custom_dataset: !function utils.load_docs\n"
            "output_type: multiple_choice\n"
            "test_split: test\n"
            f"{_few_shot_yaml(shots, turns)}"
            f"doc_to_text: !function utils.{'chat_text' if turns else 'doc_to_text'}\n"
            f"{'gen_prefix: context' + chr(10) if turns else ''}"
            f"doc_to_choice: !function utils.{choices}\n"
            f"doc_to_target: {target}\n"
            "# The slot's space is part of each choice (none when the slot is glued to the text before it).\n"
            "target_delimiter: \"\"\n"
            f"{results}"
            f"metric_list:\n{metrics}")


def _relation_yaml(config: str, relation: str, task: str, version_meta: str) -> str:
    return (f"include: _medlama_{config}_template_yaml\n"
            f"task: {_yaml(task)}\n"
            f"task_alias: {_yaml(relation)}\n"
            "dataset_kwargs:\n"
            f"  config: {_yaml(config)}\n"
            f"  relations: {_yaml([relation])}\n"
            f"{version_meta}")


def _group_yaml(config: str, tasks: Sequence[str], version_meta: str) -> str:
    listed = "".join(f"  - {_yaml(task)}\n" for task in tasks)
    aggregate = "".join(
        f"  - metric: \"{name}\"\n    aggregation: mean\n    weight_by_size: {'false' if macro else 'true'}\n"
        for name, macro in (("acc@1", False), ("acc@10", False), ("acc@1_macro", True), ("acc@10_macro", True)))
    return (f"group: medlama_{config}\n"
            f"group_alias: {_yaml(f'MedLAMA {config}')}\n"
            f"task:\n{listed}"
            "# acc@k: over all queries (each relation weighted by its size); acc@k_macro: the mean of the relations'.\n"
            f"aggregate_metric_list:\n{aggregate}"
            f"{version_meta}")


def _gen_yaml(config: str, relations: Sequence[str], stops: Sequence[str], max_gen_toks: int,
              version_meta: str, shots: int = 0, turns: bool = False) -> str:
    return (f"task: medlama_{config}_gen\n"
            "dataset_path: \"\"\n"
            "custom_dataset: !function utils.load_docs\n"
            "dataset_kwargs:\n"
            f"  config: {_yaml(config)}\n"
            f"  relations: {_yaml(list(relations))}\n"
            "output_type: generate_until\n"
            "test_split: test\n"
            f"{_few_shot_yaml(shots, turns)}"
            f"doc_to_text: !function utils.{'chat_text' if turns else 'doc_to_text'}\n"
            f"{'gen_prefix: context' + chr(10) if turns else ''}"
            "doc_to_target: !function utils.gen_target\n"
            "generation_kwargs:\n"
            f"  until: {_yaml(list(stops))}\n"
            "  do_sample: false\n"
            f"  max_gen_toks: {max_gen_toks}\n"
            "process_results: !function utils.process_generation\n"
            "metric_list:\n"
            "  - metric: \"acc@1\"\n    aggregation: mean\n    higher_is_better: true\n"
            "  - metric: \"acc@1_macro\"\n    aggregation: !function utils.macro_mean\n    higher_is_better: true\n"
            f"{version_meta}")


def _check_selection(folder: Path, settings: LmEvalExportSettings) -> None:
    """Refuse a config or relation the folder's card does not declare."""

    configs = folder_configs(folder)
    if settings.config not in configs:
        raise MedlamaInputError(f"the dataset has no config {settings.config!r}; is it a MedLAMA build?", file=folder)
    mc = is_mc(settings.config)
    prefix = f"{ranking_config(settings.config)}_"
    check_relations(settings.relations, [ranking_config(name)[len(prefix):] for name in configs
                                         if name.startswith(prefix) and is_mc(name) == mc and name != settings.config],
                    file=folder)


def export_lm_eval(data: str | Path | None, out: str | Path,
                   settings: LmEvalExportSettings = LmEvalExportSettings()) -> dict:
    """Write the lm-eval task folder of MedLAMA ``settings.config`` from ``data`` (a built folder, a
    ``push-dataset`` dry run or a Hub dataset id; ``None``: the build kept in the cache, as ``medlama probe``
    and ``export mteb`` read it) into ``out``; returns what ``medlama_export.json`` records.

    ``out`` is replaced only if it is an earlier export (a user's folder is refused, before any data is read),
    and only once the new folder is complete.
    """

    if not isinstance(settings, LmEvalExportSettings):
        raise MedlamaInputError(f"settings must be LmEvalExportSettings, not {type(settings).__name__}")
    source = None if data is None else Path(data).expanduser()
    # checks the relations against the release's before a cached build would be made
    query_source = QuerySource(dataset="medlama", data=source,
                               relations=tuple(settings.relations) if settings.relations else None)
    reads = [source] if source is not None and source.exists() else []
    check_replaceable(out, marker=MARKER, kind=KIND, reads=reads)  # before a Hub download or any reading
    folder = resolve_data(query_source)
    _check_selection(folder.path, settings)  # from the card alone, before any data file is read
    if is_mc(settings.config):
        return _export_choices(folder, out, settings, reads)
    queries = load_medlama_queries(folder, settings.config, relations=settings.relations,
                                   prompt_column=settings.prompt_column, candidates="relation")
    config = settings.config
    docs = _docs(queries, config, settings.few_shot_as_multiturn)
    _with_examples(docs, queries, settings)
    relations = list(docs)
    exported = [RelationExport(r, f"medlama_{config}_{r}", len(docs[r]), len(queries.pools[r])) for r in relations]
    version_meta = f"metadata:\n  version: {TASK_VERSION}\n"
    record = {
        "format": "lm-eval", "task_version": TASK_VERSION, "medlama_version": version("medlama"),
        "settings": as_dict(settings), "data": {**queries.info}, "candidates": queries.pool_record(),
        "group": f"medlama_{config}", "generation_task": f"medlama_{config}_gen",
        "tasks": [vars(item) for item in exported],
        "loglikelihood_requests": sum(item.queries * item.pool for item in exported),
    }

    with atomic_directory(out, marker=MARKER, kind=KIND, reads=reads) as staging:
        pools = staging / "data" / config / "pools"
        pools.mkdir(parents=True)
        for item in exported:
            rows = "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs[item.relation])
            (staging / "data" / config / f"{item.relation}.jsonl").write_text(rows, encoding="utf-8")
            (pools / f"{item.relation}.json").write_text(
                json.dumps(queries.pools[item.relation], ensure_ascii=False) + "\n", encoding="utf-8")
            (staging / f"{item.task}.yaml").write_text(
                _relation_yaml(config, item.relation, item.task, version_meta), encoding="utf-8")
        shutil.copyfile(UTILS, staging / "utils.py")
        (staging / f"_medlama_{config}_template_yaml").write_text(_template(config, shots=settings.few_shot,
                                                                            turns=settings.few_shot_as_multiturn),
                                                                  encoding="utf-8")
        (staging / f"medlama_{config}.yaml").write_text(
            _group_yaml(config, [item.task for item in exported], version_meta), encoding="utf-8")
        (staging / f"medlama_{config}_gen.yaml").write_text(
            _gen_yaml(config, relations, _stops(docs), settings.max_gen_toks, version_meta, settings.few_shot,
                      settings.few_shot_as_multiturn),
            encoding="utf-8")
        (staging / "README.md").write_text(render_readme(record, exported), encoding="utf-8")
        (staging / MARKER).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def _export_choices(folder, out: str | Path, settings: LmEvalExportSettings, reads: list) -> dict:
    """:func:`export_lm_eval` of a multiple-choice config: lm-eval ``multiple_choice`` tasks (``acc``,
    ``acc_norm``), one per relation, and their group."""
    queries = load_medlama_queries(folder, settings.config, relations=settings.relations,
                                   prompt_column=settings.prompt_column)
    config = settings.config
    docs = _mc_docs(queries, config, settings.few_shot_as_multiturn)
    _with_examples(docs, queries, settings)
    exported = [RelationExport(r, f"medlama_{config}_{r}", len(rows), max(len(doc["choices"]) for doc in rows))
                for r, rows in docs.items()]
    version_meta = f"metadata:\n  version: {TASK_VERSION}\n"
    record = {
        "format": "lm-eval", "task_version": TASK_VERSION, "medlama_version": version("medlama"),
        "settings": as_dict(settings), "data": {**queries.info}, "candidates": queries.pool_record(),
        "group": f"medlama_{config}", "generation_task": None, "tasks": [vars(item) for item in exported],
        "loglikelihood_requests": sum(len(row) for row in queries.choices),
    }
    with atomic_directory(out, marker=MARKER, kind=KIND, reads=reads) as staging:
        (staging / "data" / config).mkdir(parents=True)
        for item in exported:
            rows = "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs[item.relation])
            (staging / "data" / config / f"{item.relation}.jsonl").write_text(rows, encoding="utf-8")
            (staging / f"{item.task}.yaml").write_text(
                _relation_yaml(config, item.relation, item.task, version_meta), encoding="utf-8")
        shutil.copyfile(UTILS, staging / "utils.py")
        (staging / f"_medlama_{config}_template_yaml").write_text(
            _template(config, True, settings.few_shot, settings.few_shot_as_multiturn), encoding="utf-8")
        (staging / f"medlama_{config}.yaml").write_text(
            _mc_group_yaml(config, [item.task for item in exported], version_meta), encoding="utf-8")
        (staging / "README.md").write_text(render_mc_readme(record, exported), encoding="utf-8")
        (staging / MARKER).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record
