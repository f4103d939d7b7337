"""Multiple-choice configs: each query's gold answer and N distractors, drawn once at build time.

A query of a multiple-choice config (``hard_mc``, ``full_mc``, ``hard_<relation>_mc``; BioLAMA ``all_mc``,
``umls_mc``, ``umls_UR44_mc``) is the row of its ranking config with two more columns:

* ``choices``: the gold answer (MedLAMA: the first of ``answer_names``; BioLAMA: the first of ``obj_labels``)
  and up to N distractors (``--choices N``, default :data:`DEFAULT_CHOICES`), shuffled;
* ``label``: the index of the gold answer in ``choices``.

The draw rule (:func:`draw_choices`, quoted in the dataset card as :data:`DRAW_RULE`): the distractors come from
the query's candidate pool (its relation's pool in the same set or split: what ``--candidates relation`` ranks
it against), excluding every gold answer of the query (MedLAMA: every ``answer_names``; BioLAMA: every label
and alias of ``answers``), compared after the acc@k metric's normalisation (lower case, punctuation and
articles removed), so that no distractor counts as correct under either matching. They are drawn without
replacement from the remaining distinct names, sorted, by a generator seeded with the build's seed and the
query's id (``random.Random(f"{seed}:{id}")``, :data:`SEED_FORMAT`): a query's choices depend on the seed and
on itself only, never on the order or number of other queries. Then gold and distractors are shuffled by the
same generator. A pool with fewer than N eligible names gives every one of them (fewer choices): the build
counts such queries (``short``), the card and ``build_info.json`` record the count, and the build says so.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from medlama.core.errors import MedlamaInputError
from medlama.metrics import answer_normalizer

#: Distractors per query by default (ten choices, chance level 10%), and the default seed.
DEFAULT_CHOICES = 9
DEFAULT_SEED = 0
#: The suffix of a multiple-choice config's name.
SUFFIX = "_mc"
#: How a query's generator is seeded (``seed``, ``id``).
SEED_FORMAT = "{seed}:{id}"
DRAW_RULE = ("the gold answer (the query's first answer) and up to N distractors drawn without replacement from "
             "the query's candidate pool (its relation's pool in the same set or split), excluding every gold "
             "answer of the query compared after normalisation (lower case, punctuation and articles removed); the "
             "eligible names are sorted and kept once per normalised form (the first in sorted order), drawn by random.Random(f\"{seed}:{id}\") (Python's generator "
             "seeded with the build's seed and the query's id), and gold and distractors shuffled by the same "
             "generator; label is the gold's index in choices. A pool with fewer than N eligible names gives all "
             "of them")


def is_mc(config: str) -> bool:
    """Whether ``config`` names a multiple-choice config."""
    return config.endswith(SUFFIX)


def mc_config(config: str) -> str:
    """The multiple-choice config of the ranking config ``config`` (``hard`` -> ``hard_mc``)."""
    return f"{config}{SUFFIX}"


def ranking_config(config: str) -> str:
    """The ranking config a multiple-choice config is drawn from (``hard_may_treat_mc`` -> ``hard_may_treat``)."""
    return config.removesuffix(SUFFIX)


def check_choices(count: int, seed: int) -> None:
    """Refuse a distractor count below 1, or a seed that is not a non-negative integer."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise MedlamaInputError(f"the number of distractors (--choices) must be an integer >= 1, got {count!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise MedlamaInputError(f"the choices seed must be an integer >= 0, got {seed!r}")


def normalized(text: str) -> str:
    """The acc@k metric's ``normalized`` matching key of ``text`` (its own function, loaded from its module)."""
    return answer_normalizer()(text)


def draw_choices(query_id: str, gold: str, answers: Iterable[str], pool: Iterable[str], count: int,
                 seed: int) -> tuple[list[str], int]:
    """``(choices, label)`` of one query by :data:`DRAW_RULE`: ``gold`` and up to ``count`` names of ``pool``
    that match none of ``answers`` (after normalisation), shuffled; ``label`` is ``gold``'s index."""
    return _draw(query_id, gold, answers, _Pool(keyed(pool)), count, seed)


def keyed(pool: Iterable[str]) -> list[tuple[str, str]]:
    """The distinct names of ``pool``, sorted, each with its normalised key (computed once per pool)."""
    norm = answer_normalizer()
    return [(name, norm(name)) for name in sorted(set(pool))]


class _Pool:
    """A keyed pool made ready for many draws: its names kept once per normalised key (the first in sorted order)
    and each key's position among them. A query's eligible names are these less its excluded keys' few names, cut
    out by slicing: a build draws for every query, and walking the whole pool per query was most of its time."""

    def __init__(self, pool: Sequence[tuple[str, str]]) -> None:
        self.names: list[str] = []
        self.position: dict[str, int] = {}
        self.key_of = dict(pool)  # a query's answers are mostly pool names: their keys are known already
        for name, key in pool:
            if key not in self.position:
                self.position[key] = len(self.names)
                self.names.append(name)

    def key(self, name: str) -> str:
        """The normalised key of ``name`` (looked up when the pool holds it)."""
        return self.key_of[name] if name in self.key_of else answer_normalizer()(name)

    def eligible(self, excluded: set[str]) -> list[str]:
        """The names whose key is not in ``excluded``, in order (the same list as a walk of the pool gives)."""
        cuts = sorted(self.position[key] for key in excluded if key in self.position)
        eligible, start = [], 0
        for cut in cuts:
            eligible += self.names[start:cut]
            start = cut + 1
        eligible += self.names[start:]
        return eligible


def _draw(query_id: str, gold: str, answers: Iterable[str], pool: _Pool, count: int,
          seed: int) -> tuple[list[str], int]:
    # one name per normalised key (no two choices read as the same answer), none matching a gold answer
    eligible = pool.eligible({pool.key(name) for name in (gold, *answers)})
    rng = random.Random(SEED_FORMAT.format(seed=seed, id=query_id))
    choices = [gold, *rng.sample(eligible, min(count, len(eligible)))]
    rng.shuffle(choices)
    return choices, choices.index(gold)


@dataclass
class ChoicesRecord:
    """What a build records of its multiple-choice configs (``build_info.json`` and the card)."""

    distractors: int = DEFAULT_CHOICES
    seed: int = DEFAULT_SEED
    rule: str = DRAW_RULE
    #: Queries given fewer than ``distractors`` distractors (their pool had too few eligible names), per config.
    short: dict[str, int] = field(default_factory=dict)
    #: Their ids, the first few per config.
    short_examples: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def note(self) -> str | None:
        """One line on the queries with fewer choices, or ``None`` when every query got all its distractors."""
        if not any(self.short.values()):
            return None
        parts = ", ".join(f"{config}: {count:,}" for config, count in self.short.items() if count)
        return (f"multiple choice: some queries have fewer than {self.distractors} distractors, their pool having "
                f"too few names that are not gold answers ({parts}); they keep every eligible name")


def by_pool(rows: Sequence[dict], *, group_of: Callable[[dict], str], names_of: Callable[[dict], Iterable[str]],
            gold_of: Callable[[dict], str], answers_of: Callable[[dict], Sequence[str]], count: int, seed: int,
            record: ChoicesRecord | None = None, config: str = "") -> list[dict]:
    """``rows`` with ``choices`` and ``label`` added (new dicts), each drawn by :func:`draw_choices` from the pool of
    its group (its relation): the distinct names ``names_of`` gives over the group's rows, as the ranking configs'
    pools are made. Queries given fewer than ``count`` distractors are counted in ``record.short[config]`` (the
    first five ids in ``record.short_examples[config]``)."""
    pools: dict[str, set[str]] = {}
    for row in rows:
        pools.setdefault(group_of(row), set()).update(names_of(row))
    keyed_pools = {group: _Pool(keyed(names)) for group, names in pools.items()}
    out, short = [], []
    for row in rows:
        choices, label = _draw(row["id"], gold_of(row), answers_of(row), keyed_pools[group_of(row)], count, seed)
        if len(choices) - 1 < count:
            short.append(row["id"])
        out.append({**row, "choices": choices, "label": label})
    if record is not None and config:
        record.short[config] = len(short)
        if short:
            record.short_examples[config] = short[:5]
    return out


def with_medlama_choices(rows: Sequence[dict], count: int, seed: int, record: ChoicesRecord | None = None,
                         config: str = "") -> list[dict]:
    """MedLAMA rows with ``choices`` and ``label``: the first answer name and distractors from the relation's pool
    of ``rows`` (head and answer names, as ``candidates_<set>_<relation>``), no answer name among them."""
    return by_pool(rows, group_of=lambda row: row["relation"], names_of=lambda row: [row["head_name"],
                                                                                    *row["answer_names"]],
                   gold_of=lambda row: row["answer_names"][0], answers_of=lambda row: row["answer_names"],
                   count=count, seed=seed, record=record, config=config)


def with_biolama_choices(rows: Sequence[dict], count: int, seed: int, record: ChoicesRecord | None = None,
                         config: str = "") -> list[dict]:
    """BioLAMA rows (one split) with ``choices`` and ``label``: the first object label and distractors from the
    relation's pool in ``rows`` (subject and object labels, as a BioLAMA probe's pool), no label or alias of the
    query's ``answers`` among them."""
    return by_pool(rows, group_of=lambda row: f"{row['source']}_{row['relation']}",
                   names_of=lambda row: [row["sub_label"], *row["obj_labels"]], gold_of=lambda row: row["obj_labels"][0],
                   answers_of=lambda row: row["answers"], count=count, seed=seed, record=record, config=config)


def mc_features(features):
    """The features of a multiple-choice config: those of its ranking config, ``choices`` and ``label``."""
    from datasets import Features, List, Value  # datasets only when a schema is made

    return Features({**features, "choices": List(Value("string")), "label": Value("int32")})


def mc_dataset(rows: Sequence[dict], features):
    """``rows`` (with their choices) as a ``datasets.Dataset`` of a multiple-choice config whose ranking config
    has ``features``; no rows give an empty one of the same schema."""
    from datasets import Dataset  # datasets only when a table is made

    schema = mc_features(features)
    return Dataset.from_list(list(rows), features=schema) if rows else \
        Dataset.from_dict({name: [] for name in schema}, features=schema)


def chance_level(choices: Sequence[Sequence[str]]) -> float:
    """The expected acc@1 of a uniform guess: the mean of ``1 / len(choices)`` over the queries."""
    return math.fsum(1 / len(row) for row in choices) / len(choices) if choices else 0.0
