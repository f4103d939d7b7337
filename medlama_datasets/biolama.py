"""BioLAMA (Sung et al., EMNLP 2021) as a Hugging Face dataset folder.

``build_biolama`` reads the release (``medlama.loaders.biolama_release``): every relation of every
source with its train / dev / test records and its manual prompt. ``write_biolama`` writes one Parquet
file per relation and split plus a README dataset card whose YAML declares the configs, so that
``load_dataset(DIR, "umls")`` works offline, and the same folder works on the Hub.

Configs, each with the splits ``train``, ``dev`` and ``test``:

* ``all`` (default): every relation of every source built;
* ``ctd``, ``umls``, ``wikidata``: one source;
* ``<source>_<PID>``, e.g. ``umls_UR44``: one relation.

A row is one (subject, relation) record of the release with all its gold objects, their aliases and
types, the relation's manual prompt and the query built from it (``[X]`` filled with the subject label,
``[Y]`` kept as the placeholder that probers replace with their own mask token).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from medlama.datasets.medlama import _quiet_datasets, _to_parquet, fill_prompt
from medlama.errors import MedlamaInputError
from medlama.loaders import biolama_release as release

SPLITS = release.SPLITS
SOURCES = release.SOURCES
DEFAULT_CONFIG = "all"


def features():
    """The declared schema of a BioLAMA row."""
    from datasets import Features, List, Value

    return Features({
        "id": Value("string"),
        "relation": Value("string"),
        "source": Value("string"),
        "sub_uri": Value("string"),
        "sub_label": Value("string"),
        "sub_type": Value("string"),
        "sub_aliases": List(Value("string")),
        "obj_uris": List(Value("string")),
        "obj_labels": List(Value("string")),
        "obj_types": List(Value("string")),
        "obj_aliases": List(List(Value("string"))),
        "answers": List(Value("string")),
        "template": Value("string"),
        "query": Value("string"),
    })


def gold_answers(labels: Iterable[str], aliases: Iterable[Iterable[str]]) -> list[str]:
    """Every string that counts as correct: the object labels, then their aliases; duplicates and blanks dropped."""
    out = dict.fromkeys(label for label in labels if label.strip())
    for group in aliases:
        out.update(dict.fromkeys(alias for alias in group if alias.strip()))
    return list(out)


def relation_config(source: str, relation: str) -> str:
    return f"{source}_{relation}"


@dataclass
class BuildReport:
    """What the build read and checked."""

    origin: str
    url: str
    archive_sha256: str | None
    #: False when the input was not checked against a trusted SHA-256 (unpinned hash, a folder, --no-verify).
    checksums_verified: bool
    #: How the input was checked, in words.
    verification: str
    sources: list[str]
    relations: dict[str, list[str]]
    #: Records (uuid) found in more than one split of a relation: {"config", "uuid", "splits"}.
    split_overlaps: list[dict] = field(default_factory=list)
    #: Manual prompts for relations without data, per source.
    prompts_without_data: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class BiolamaBuild:
    """A built BioLAMA: rows per relation config and split, the prompts, and the report."""

    rows: dict[str, dict[str, list[dict]]]  # relation config -> split -> rows
    templates: dict[str, str]  # relation config -> manual prompt
    report: BuildReport

    def relation_configs(self, source: str | None = None) -> list[str]:
        sources = [source] if source else self.report.sources
        return [relation_config(s, rel) for s in sources for rel in self.report.relations[s]]

    def config_names(self) -> list[str]:
        return [DEFAULT_CONFIG, *self.report.sources, *self.relation_configs()]

    def dataset(self, config: str = DEFAULT_CONFIG, split: str = "test"):
        """One config's split as a ``datasets.Dataset``."""
        from datasets import Dataset

        if config == DEFAULT_CONFIG:
            parts = self.relation_configs()
        elif config in self.report.sources:
            parts = self.relation_configs(config)
        elif config in self.rows:
            parts = [config]
        else:
            raise MedlamaInputError(f"unknown config {config!r}; choose from {self.config_names()}")
        if split not in SPLITS:
            raise MedlamaInputError(f"unknown split {split!r}; choose from {list(SPLITS)}")
        return Dataset.from_list([row for part in parts for row in self.rows[part][split]], features=features())


def _row(record: release.Record, template: str) -> dict:
    return {
        "id": record.uuid,
        "relation": record.relation,
        "source": record.source,
        "sub_uri": record.sub_uri,
        "sub_label": record.sub_label,
        "sub_type": record.sub_type,
        "sub_aliases": list(record.sub_aliases),
        "obj_uris": list(record.obj_uris),
        "obj_labels": list(record.obj_labels),
        "obj_types": list(record.obj_types),
        "obj_aliases": [list(group) for group in record.obj_aliases],
        "answers": gold_answers(record.obj_labels, record.obj_aliases),
        "template": template,
        "query": fill_prompt(template, record.sub_label),
    }


def build_biolama(source: str | Path | None = None, *, sources: Sequence[str] = SOURCES, sha256: str | None = None,
                  verify_checksums: bool = True, cache_dir: str | Path | None = None, url: str = release.URL,
                  progress: bool = True) -> BiolamaBuild:
    """Read BioLAMA from its release: every relation of ``sources`` with its three splits.

    ``source``: a local ``data.tar.gz`` or extracted folder, else ``$BIOLAMA_SOURCE``, else the download
    of ``url``, which needs ``sha256`` (or ``$BIOLAMA_SHA256``, or a pinned hash) unless
    ``verify_checksums=False``. Any bad file or record stops the build with an error naming it.
    """
    from tqdm.auto import tqdm

    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise MedlamaInputError(f"unknown source(s) {unknown}; choose from {list(SOURCES)}")
    sources = [s for s in SOURCES if s in sources]
    with release.open_release(source, sha256=sha256, verify=verify_checksums, cache_dir=cache_dir, url=url) as found:
        report = BuildReport(origin=found.origin, url=url, archive_sha256=found.archive_sha256,
                             checksums_verified=found.verified, verification=found.verification,
                             sources=list(sources), relations={})
        rows: dict[str, dict[str, list[dict]]] = {}
        templates: dict[str, str] = {}
        for src in sources:
            if not found.source_dir(src).is_dir():
                raise MedlamaInputError(f"source folder {src}/ missing from the release", file=found.source_dir(src))
            relations = found.relations(src)
            prompt_file = found.prompt_file(src)
            prompts = release.read_prompts(prompt_file)
            report.relations[src] = relations
            extra = sorted(set(prompts) - set(relations), key=release.natural_key)
            if extra:
                report.prompts_without_data[src] = extra
            for rel in tqdm(relations, desc=f"BioLAMA {src}", unit="relation", disable=not progress):
                if rel not in prompts:
                    raise MedlamaInputError(f"no manual prompt for relation {rel!r}", file=prompt_file)
                config = relation_config(src, rel)
                templates[config] = prompts[rel].template
                rows[config] = {}
                first_split: dict[str, str] = {}
                for split in SPLITS:
                    path = found.split_file(src, rel, split)
                    records = release.read_split(path, src, rel)
                    if split == "test" and not records:
                        raise MedlamaInputError("no test records", file=path)
                    for record in records:
                        if record.uuid in first_split:
                            report.split_overlaps.append({"config": config, "uuid": record.uuid,
                                                          "splits": [first_split[record.uuid], split]})
                        else:
                            first_split[record.uuid] = split
                    rows[config][split] = [_row(record, templates[config]) for record in records]
    return BiolamaBuild(rows=rows, templates=templates, report=report)


def load_biolama(source: str | Path | None = None, config: str = DEFAULT_CONFIG,
                 **options) -> "DatasetDict":  # noqa: F821
    """BioLAMA straight from the release as a ``DatasetDict`` (``train``, ``dev``, ``test``) of one config."""
    from datasets import DatasetDict

    build = build_biolama(source, **options)
    return DatasetDict({split: build.dataset(config, split) for split in SPLITS})


# --------------------------------------------------------------------------- statistics


def biolama_statistics(build: BiolamaBuild) -> list[dict]:
    """One row per relation, then one per source and a final ``all`` row.

    ``objects_per_query`` and ``answers_per_query`` (gold labels plus aliases, distinct) are over all
    splits; ``distinct_objects`` counts distinct object labels over all splits.
    """

    def row(source: str, relation: str, configs: Sequence[str], template: str) -> dict:
        counts = {split: sum(len(build.rows[c][split]) for c in configs) for split in SPLITS}
        everything = [r for c in configs for split in SPLITS for r in build.rows[c][split]]
        total = len(everything)
        return {
            "source": source, "relation": relation, "relations": len(configs), **counts, "total": total,
            "objects_per_query": sum(len(r["obj_labels"]) for r in everything) / total if total else float("nan"),
            "answers_per_query": sum(len(r["answers"]) for r in everything) / total if total else float("nan"),
            "distinct_objects": len({label for r in everything for label in r["obj_labels"]}),
            "template": template,
        }

    rows = []
    for src in build.report.sources:
        for config in build.relation_configs(src):
            rows.append(row(src, config.split("_", 1)[1], [config], build.templates[config]))
    for src in build.report.sources:
        rows.append(row(src, "all", build.relation_configs(src), ""))
    rows.append(row("all", "all", build.relation_configs(), ""))
    return rows


def statistics_markdown(rows: list[dict]) -> str:
    lines = ["| Source | Relation | Train | Dev | Test | Objects / query | Answers / query (with aliases) "
             "| Distinct objects | Manual prompt |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        total = r["relation"] == "all"
        source = f"**{r['source']}**" if total else r["source"]
        relation = f"**all ({r['relations']})**" if total else f"`{r['relation']}`"
        template = r["template"].replace("|", "\\|")
        lines.append(f"| {source} | {relation} | {r['train']:,} | {r['dev']:,} | {r['test']:,} | "
                     f"{r['objects_per_query']:.2f} | {r['answers_per_query']:.2f} | {r['distinct_objects']:,} | "
                     f"{f'`{template}`' if template else ''} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- writing the folder


def config_layout(build: BiolamaBuild) -> dict[str, str]:
    """Config name -> Parquet path pattern inside the folder, with ``{split}`` for the split."""
    layout = {DEFAULT_CONFIG: "data/*/*/{split}.parquet"}
    for src in build.report.sources:
        layout[src] = f"data/{src}/*/{{split}}.parquet"
    for src in build.report.sources:
        for rel in build.report.relations[src]:
            layout[relation_config(src, rel)] = f"data/{src}/{rel}/{{split}}.parquet"
    return layout


def render_biolama_card(build: BiolamaBuild, layout: dict[str, str], stats: list[dict]) -> str:
    """The README of a built folder: the template's text, configs and schemas from the data, statistics filled."""
    from datasets import DatasetInfo, SplitDict, SplitInfo
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    from medlama.dataset_cards import card_path
    from medlama.datasets.card import fill_statistics

    card = DatasetCard.load(card_path("biolama"))
    MetadataConfigs({
        name: {"data_files": [{"split": split, "path": pattern.format(split=split)} for split in SPLITS],
               **({"default": True} if name == DEFAULT_CONFIG else {})}
        for name, pattern in layout.items()
    }).to_dataset_card_data(card.data)
    totals = {(r["source"], r["relation"]): r for r in stats}
    infos = {}
    for name in (DEFAULT_CONFIG, *build.report.sources):
        counts = totals[(name if name != DEFAULT_CONFIG else "all", "all")]
        splits = SplitDict()
        for split in SPLITS:
            splits.add(SplitInfo(name=split, num_examples=counts[split]))
        infos[name] = DatasetInfo(features=features(), config_name=name, splits=splits)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    # Tags name the sources actually built; `umls` marks UMLS-derived data (gated when pushed to the Hub).
    card.data.tags = [tag for tag in (card.data.tags or []) if tag not in SOURCES] + list(build.report.sources)
    card.text = fill_statistics(card.text, statistics_markdown(stats))
    total = sum(totals[("all", "all")][split] for split in SPLITS)
    card.data.size_categories = ["n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else
                                 "10K<n<100K" if total < 100_000 else "100K<n<1M"]
    state = "verified" if build.report.checksums_verified else "**not verified against a trusted SHA-256**"
    card.text = card.text.replace("<!-- provenance -->", f"This build's input: {build.report.verification} "
                                                         f"({state}).")
    return str(card)


def write_biolama(out_dir: str | Path, source: str | Path | None = None, **options) -> tuple[BiolamaBuild, list[dict]]:
    """Build BioLAMA and write it to ``out_dir`` atomically; return the build and its statistics.

    An earlier build in ``out_dir`` is replaced only once the new one is completely written.
    """
    from datasets import Dataset

    from medlama.atomic import atomic_directory, check_replaceable

    check_replaceable(out_dir, marker="build_info.json")  # before the build, not after it
    build = build_biolama(source, **options)
    stats = biolama_statistics(build)
    layout = config_layout(build)
    card = render_biolama_card(build, layout, stats)
    with atomic_directory(out_dir, marker="build_info.json") as staging, _quiet_datasets():
        for config in build.relation_configs():
            for split in SPLITS:
                table = Dataset.from_list(build.rows[config][split], features=features())
                _to_parquet(table, staging / layout[config].format(split=split))
        (staging / "README.md").write_text(card, encoding="utf-8")
        info = {"dataset": "biolama", "report": asdict(build.report), "statistics": stats,
                "configs": {name: [pattern.format(split=s) for s in SPLITS] for name, pattern in layout.items()}}
        (staging / "build_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return build, stats


def _fingerprint(source: str | Path | None, sha256: str | None) -> str:
    """A cache key for the input: the archive's SHA-256, or for a folder the names, sizes and times of its files."""
    import os

    source = source or os.environ.get(release.SOURCE_ENV)
    if source is None:
        expected = release.expected_sha256(sha256)
        return expected[:16] if expected else "unverified"
    path = Path(source).expanduser()
    if path.is_file():
        return release.sha256_of(path)[:16]
    if not path.exists():
        raise MedlamaInputError("BioLAMA source not found", file=path)
    digest = hashlib.sha256(str(path.resolve()).encode())
    for file in sorted(path.rglob("*.jsonl")):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "folder-" + digest.hexdigest()[:16]


def cached_build(source: str | Path | None = None, cache_dir: str | Path | None = None, **options) -> Path:
    """A BioLAMA folder built once into the cache and reused (``medlama probe --dataset biolama`` without ``--data``).

    Keyed by the input: the archive's SHA-256, or a fingerprint of an extracted folder.
    """
    out = release.cache_root(cache_dir) / "datasets" / f"biolama-{_fingerprint(source, options.get('sha256'))}"
    if not (out / "build_info.json").is_file():
        write_biolama(out, source, cache_dir=cache_dir, **options)
    return out
