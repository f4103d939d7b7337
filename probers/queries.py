"""The probing front end shared by every prober: queries, gold answers and candidates of a dataset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from medlama.defaults import MASK_PLACEHOLDER
from medlama.errors import MedlamaInputError

PROMPT_COLUMNS = ("query_human", "query_default")


@dataclass(frozen=True)
class QuerySet:
    """Cloze queries with the object slot as ``[Y]``, their gold answers, and the candidate names.

    Probers fill ``[Y]`` with their own model's mask token (``with_mask``).
    """

    ids: list[str]
    relations: list[str]
    texts: list[str]
    gold: list[list[str]]
    candidates: list[str]
    name: str = "queries"

    def __post_init__(self) -> None:
        sizes = {len(self.ids), len(self.relations), len(self.texts), len(self.gold)}
        if len(sizes) != 1:
            raise ValueError(f"query set columns differ in length: {sorted(sizes)}")
        for index, text in enumerate(self.texts):
            if text.count(MASK_PLACEHOLDER) != 1:
                raise MedlamaInputError(f"query {self.ids[index]!r} has {text.count(MASK_PLACEHOLDER)} "
                                        f"{MASK_PLACEHOLDER} slots, needs exactly one: {text!r}")

    def __len__(self) -> int:
        return len(self.texts)

    def with_mask(self, mask_token: str) -> list[str]:
        """The queries with ``[Y]`` replaced by ``mask_token``."""
        return [text.replace(MASK_PLACEHOLDER, mask_token) for text in self.texts]

    def subset(self, indices: Sequence[int], name: str | None = None) -> "QuerySet":
        pick = list(indices)
        return QuerySet([self.ids[i] for i in pick], [self.relations[i] for i in pick],
                        [self.texts[i] for i in pick], [self.gold[i] for i in pick], self.candidates,
                        name or self.name)


def load_medlama_queries(data_dir: str | Path, config: str = "hard", *, relations: Sequence[str] | None = None,
                         prompt_column: str = "query_human") -> QuerySet:
    """Queries of a built MedLAMA folder (``medlama build medlama``) for ``config`` (``hard`` or ``full``).

    The candidate set is the config's exported one (all answer and head names of the evaluated
    relations), as the reference probe builds it; a relation subset gets the union of its relations'.
    """
    from datasets import load_dataset

    data_dir = Path(data_dir)
    if not (data_dir / "README.md").is_file():
        raise MedlamaInputError("not a built dataset folder (no README.md); run `medlama build medlama --out DIR`",
                                file=data_dir)
    if prompt_column not in PROMPT_COLUMNS:
        raise MedlamaInputError(f"unknown prompt column {prompt_column!r}; choose from {list(PROMPT_COLUMNS)}")
    try:
        data = load_dataset(str(data_dir), config, split="test")
    except ValueError as error:
        raise MedlamaInputError(f"cannot load config {config!r}: {error}", file=data_dir) from None
    known = sorted(set(data["relation"]))
    if relations:
        unknown = sorted(set(relations) - set(known))
        if unknown:
            raise MedlamaInputError(f"unknown relation(s) {unknown}; known: {known}", file=data_dir)
        data = data.filter(lambda batch: [r in set(relations) for r in batch["relation"]], batched=True)
        names: set[str] = set()
        for rel in relations:
            names.update(load_dataset(str(data_dir), f"candidates_{config}_{rel}", split="test")["name"])
        candidates = sorted(names)
        name = f"{config}[{','.join(relations)}]"
    else:
        candidates = list(load_dataset(str(data_dir), f"candidates_{config}", split="test")["name"])
        name = config
    return QuerySet(ids=list(data["id"]), relations=list(data["relation"]), texts=list(data[prompt_column]),
                    gold=[list(g) for g in data["answer_names"]], candidates=candidates, name=name)
