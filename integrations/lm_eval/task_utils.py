"""The task functions of medlama's lm-evaluation-harness tasks; ``medlama export lm-eval`` copies this file
into the task folder as ``utils.py``, where the task YAMLs call it (``!function utils.process_results``).

Self-contained on purpose: it imports the standard library, ``datasets`` and (for the few-shot sampler's base
class) ``lm_eval`` itself, which runs it, never medlama, so that the exported folder runs where medlama is not
installed. Each function reproduces
one rule of ``medlama probe``; the export's test checks that lm-eval's numbers equal medlama's.

* The documents (``load_docs``) and the candidate pools are the JSON files beside this one, written by the
  export: ``data/<config>/<relation>.jsonl`` (one query a line) and ``data/<config>/pools/<relation>.json``
  (the relation's pool, in the order of the folder's ``candidates_<config>_<relation>`` config).
* A query is cut at its ``[Y]`` slot, as ``causal-likelihood`` cuts it: the context is the text before the
  slot, trailing spaces removed; a choice is the slot's leading space (none when the slot is glued to the
  text before it, or opens it), the candidate name and the whole text after the slot (MedLAMA's `` .``),
  all of which the model scores, as medlama's sum reduction does. lm-eval moves no space (the context ends
  in none) and scores the choice's tokens as the continuation of the context's.
* acc@k (``process_results``): the candidates ordered by log-likelihood, higher first, equal scores in pool
  order, a name listed twice counted once at its best score (medlama's ``rank_unique``); a query scores 1 at
  k when one of its gold names is among the first k. lm-eval's own ``acc`` (argmax, one gold index) cannot
  express several gold names or k > 1, hence the task's own metric.
* Multiple choice (``hard_mc``, ``full_mc``): ``doc_to_choices`` gives each query's own choices, cut as above;
  the target is the document's ``label`` and the metrics lm-eval's own ``acc`` and ``acc_norm``.
* Few-shot (``medlama export lm-eval --few-shot N``): each document lists the ids of its examples (``fewshot``),
  drawn by medlama at export as ``medlama probe --few-shot`` draws them; :class:`DrawnExamples`, the tasks'
  sampler, hands lm-eval those documents, and ``fewshot_target`` shows each filled (the slot's space, its first
  gold name, the text after the slot), so both read the same prompts.
* Few-shot as chat turns (``--few-shot-as-multiturn``, multiple choice; run with ``--apply_chat_template
  --fewshot_as_multiturn``): each example is a user turn (``chat_text``: medlama's chat instruction around the
  query) and an assistant turn (``chat_answer``: the sentence filled in); the query is the last user turn, and
  the assistant's reply starts with its context (the task's ``gen_prefix``), each choice its continuation.
* The generation task (``process_generation``) scores the greedy answer, cut at the first stop sequence,
  by normalised match against the gold names: lower case, punctuation and the articles a/an/the removed,
  whitespace collapsed (medlama's acc@k ``normalized`` matching, as ``causal-generate`` uses it).
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
from pathlib import Path

try:  # lm-eval runs these tasks; without it (the functions read on their own) the sampler has no base
    from lm_eval.api.samplers import ContextSampler
except ImportError:  # pragma: no cover - lm-eval absent
    ContextSampler = object

HERE = Path(__file__).resolve().parent
#: The cut-offs the ranking tasks report.
KS = (1, 10)

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# -- documents and pools --------------------------------------------------------------------------------

def load_docs(config: str, relations: list[str], **metadata):
    """The ``test`` split of the named relations' queries (lm-eval's ``custom_dataset``; ``metadata``: what
    lm-eval passes besides, unused)."""
    # datasets loads when this runs, not when medlama.integrations.lm_eval.task_utils is imported
    from datasets import Dataset, DatasetDict

    rows = []
    for relation in relations:
        path = HERE / "data" / config / f"{relation}.jsonl"
        with path.open(encoding="utf-8") as handle:
            rows.extend(json.loads(line) for line in handle if line.strip())
    return DatasetDict({"test": Dataset.from_list(rows)})


@functools.lru_cache(maxsize=None)
def pool(config: str, relation: str) -> tuple[str, ...]:
    """The candidate names a relation's queries are ranked against, in the pool's order."""
    path = HERE / "data" / config / "pools" / f"{relation}.json"
    return tuple(json.loads(path.read_text(encoding="utf-8")))


def doc_to_text(doc: dict) -> str:
    return doc["context"]


def doc_to_choice(doc: dict) -> list[str]:
    """Every candidate as the continuation the model scores: slot delimiter, name, text after the slot."""
    return [doc["delimiter"] + name + doc["suffix"] for name in pool(doc["config"], doc["relation"])]


def doc_to_choices(doc: dict) -> list[str]:
    """A multiple-choice query's choices as the continuations the model scores (slot delimiter, name, text after
    the slot); lm-eval's ``acc`` is whether the best-scored one is ``doc["label"]``."""
    return [doc["delimiter"] + name + doc["suffix"] for name in doc["choices"]]


def doc_to_target(doc: dict) -> list[int]:
    """The pool indices of the gold names (what lm-eval logs as the targets; acc@k is ``process_results``')."""
    return list(doc["target"])


def gen_target(doc: dict) -> str:
    return doc["answers"][0]


def fewshot_target(doc: dict) -> str:
    """A few-shot example's answer as shown after its context: the slot's space, first gold name, text after it."""
    return doc["delimiter"] + doc["answers"][0] + doc["suffix"]


def chat_text(doc: dict) -> str:
    """A query's user turn with ``--few-shot-as-multiturn`` (medlama's chat instruction around it, written by the
    export); the assistant's turn then starts with ``doc["context"]`` (the task's ``gen_prefix``)."""
    return doc["chat_query"]


def chat_answer(doc: dict) -> str:
    """A few-shot example's assistant turn with ``--few-shot-as-multiturn``: its sentence, first gold name filled in."""
    return doc["chat_answer"]


class DrawnExamples(ContextSampler):
    """lm-eval's few-shot sampler for these tasks: a query's examples are the documents whose ids its own
    document lists (``fewshot``, drawn by medlama at export: the query's relation, never the query nor a fact
    with its subject), in that order."""

    def sample(self, n: int, eval_doc=None, df=None, **kwargs):
        if eval_doc is None:
            raise ValueError("medlama's few-shot sampler needs the query (fewshot_split must be the test split)")
        drawn = list(eval_doc.get("fewshot") or [])
        if n != len(drawn):
            raise ValueError(f"query {eval_doc['id']}: {n} few-shot examples asked (--num_fewshot), but the export "
                             f"drew {len(drawn)}; export again with medlama export lm-eval --few-shot {n}")
        if not hasattr(self, "_by_id"):
            self._by_id = {doc["id"]: doc for doc in self.fewshot_docs()}
        return [self._by_id[example] for example in drawn]


# -- ranking ------------------------------------------------------------------------------------------------

def gold_position(names, scores, gold) -> float:
    """The 0-based rank of the best-placed gold name among the distinct names, ``inf`` when none is a candidate.

    Names are ordered by score (higher first) and equal scores by where a name first appears; a name listed
    twice keeps its best score, and an empty name is never ranked.
    """
    best: dict[str, float] = {}
    first: dict[str, int] = {}
    for order, (name, score) in enumerate(zip(names, scores)):
        if not name:
            continue
        first.setdefault(name, order)
        if name not in best or score > best[name]:
            best[name] = score
    position = math.inf
    for name in set(gold) & set(best):
        score, at = best[name], first[name]
        ahead = sum(1 for other, value in best.items() if value > score or (value == score and first[other] < at))
        position = min(position, ahead)
    return position


def process_results(doc: dict, results) -> dict:
    """acc@1 and acc@10 of one query from the log-likelihood of every candidate (the ``_macro`` copies are
    what the group averages over relations without weighting)."""
    scores = [float(result[0]) if isinstance(result, (tuple, list)) else float(result) for result in results]
    names = pool(doc["config"], doc["relation"])
    if len(scores) != len(names):
        raise ValueError(f"query {doc['id']}: {len(scores)} log-likelihoods for {len(names)} candidates")
    if any(math.isnan(score) for score in scores):
        raise ValueError(f"query {doc['id']}: the model gave NaN log-likelihoods (broken weights or an fp16 "
                         "overflow); its rank cannot be known")
    position = gold_position(names, scores, doc["answers"])
    out = {}
    for k in KS:
        hit = float(position < k)
        out[f"acc@{k}"] = hit
        out[f"acc@{k}_macro"] = hit
    return out


# -- generation -------------------------------------------------------------------------------------------

def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (medlama's acc@k ``normalized`` matching)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def process_generation(doc: dict, results) -> dict:
    """1 when the generated answer matches a gold name after normalisation (an empty answer never does);
    ``acc@1_macro`` keeps the relation, for :func:`macro_mean`."""
    answer = normalize_answer(results[0] if results else "")
    gold = {normalize_answer(name) for name in doc["answers"]} - {""}
    hit = float(bool(answer) and answer in gold)
    return {"acc@1": hit, "acc@1_macro": (doc["relation"], hit)}


def macro_mean(items) -> float:
    """The mean over relations of each relation's mean (MedLAMA's macro average)."""
    per: dict[str, list[float]] = {}
    for relation, hit in items:
        per.setdefault(relation, []).append(hit)
    return sum(sum(hits) / len(hits) for hits in per.values()) / len(per) if per else math.nan
