"""BioLAMA (Sung et al., EMNLP 2021) as a ``datasets`` builder: :class:`BiolamaBuilder`.

The builder reads the release (``medlama.loaders.biolama_release``): every relation of every source with
its train / dev / test records and its manual prompt. The input is a local ``data.tar.gz`` or extracted
folder (``source``, else ``$BIOLAMA_SOURCE``), else the pinned URL through the download manager, the
archive checked against a SHA-256 before it is extracted (into the download manager's cache)::

    builder = BiolamaBuilder(config_name="umls", source="path/to/data.tar.gz")
    builder.download_and_prepare()
    umls = builder.as_dataset()   # DatasetDict: train, dev, test
    report = builder.read_release().report   # what the build read and checked (read_biolama's)

Configs, each with the splits ``train``, ``dev`` and ``test``:

* ``all`` (default): every relation of every source built (``sources=`` narrows it);
* ``ctd``, ``umls``, ``wikidata``: one source;
* ``<source>_<PID>``, e.g. ``umls_UR44``: one relation (the relations are the release's folders, so
  these configs are made from their names on demand);
* ``<config>_mc`` for each of those (``all_mc``, ``umls_mc``, ``umls_UR44_mc``): the same rows as multiple
  choice, with ``choices`` and ``label`` (:mod:`medlama.datasets.choices`; ``choices`` distractors per query,
  ``choices_seed``).

A row is one (subject, relation) record of the release with all its gold objects, their aliases and
types, the relation's manual prompt and the query built from it (``[X]`` filled with the subject label,
``[Y]`` kept as the placeholder that probers replace with their own mask token). :func:`build_biolama`
and :func:`load_biolama` are the one-call forms; ``write_biolama`` (the folder of ``medlama build
biolama``, in ``medlama.datasets.biolama_folder``) is a thin layer over them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from medlama.core.checksums import sha256_of
from medlama.datasets.choices import DEFAULT_CHOICES, DEFAULT_SEED, ChoicesRecord, check_choices, is_mc, mc_config, \
    mc_dataset, mc_features, normalized, ranking_config, with_biolama_choices
from medlama.datasets.downloads import builder_cache, check_sha256, discard, download, download_config
from medlama.datasets.export import prepare_fresh
from medlama.datasets.prompts import fill_prompt
from medlama.core.errors import MedlamaInputError
from medlama.loaders import biolama_release as release
from datasets import Features, List, Value
from datasets import Dataset
from datasets.builder import Key

SPLITS = release.SPLITS
SOURCES = release.SOURCES
DEFAULT_CONFIG = "all"
_RELATION_CONFIG = re.compile(rf"^({'|'.join(SOURCES)})_(.+)$")
_GZIP_MAGIC = b"\x1f\x8b"
_OFFLINE_HINT = f"offline, pass --source with a local data.tar.gz or extracted folder (or set ${release.SOURCE_ENV})"


def features():
    """The declared schema of a BioLAMA row."""
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
    #: Where the hash the archive was checked against came from (``release.DIGEST_SOURCES``): ``supplied`` when
    #: none was (the authors publish none): ``archive_sha256`` is then the digest of the archive the user gave.
    digest_source: str | None = None
    #: Records (uuid) found in more than one split of a relation: {"config", "uuid", "splits"}.
    split_overlaps: list[dict] = field(default_factory=list)
    #: Manual prompts for relations without data, per source.
    prompts_without_data: dict[str, list[str]] = field(default_factory=dict)
    #: Splits without a record in any relation built (``["train", "dev"]``: a test-only release); the folder
    #: declares no such split, and whatever trains on it (learned prompts) is refused for want of it.
    empty_splits: list[str] = field(default_factory=list)
    #: Gold answers (object labels or aliases) that acc@k's ``normalized`` matching reduces to nothing (``.``,
    #: ``A``, ``The``), left out of a record's ``answers`` since none could be matched: {"config", "split",
    #: "uuid", "answer"}. A record with no answer left is refused instead.
    dropped_answers: list[dict] = field(default_factory=list)


@dataclass
class BiolamaBuild:
    """A built BioLAMA: rows per relation config and split, the prompts, and the report."""

    rows: dict[str, dict[str, list[dict]]]  # relation config -> split -> rows
    templates: dict[str, str]  # relation config -> manual prompt
    report: BuildReport
    #: The builder's prepared ``all`` config (``train``, ``dev``, ``test``), relations in build order.
    datasets: "datasets.DatasetDict | None" = None
    #: The rows with ``choices`` and ``label`` (relation config -> split -> rows), and what their draw recorded.
    choice_rows: dict[str, dict[str, list[dict]]] | None = None
    choices_record: ChoicesRecord | None = None

    def splits(self) -> list[str]:
        """The splits the build has records of (a test-only release: ``["test"]``)."""
        return [split for split in SPLITS if split not in self.report.empty_splits]

    def relation_configs(self, source: str | None = None) -> list[str]:
        sources = [source] if source else self.report.sources
        return [relation_config(s, rel) for s in sources for rel in self.report.relations[s]]

    def config_names(self) -> list[str]:
        return [DEFAULT_CONFIG, *self.report.sources, *self.relation_configs()]

    def dataset(self, config: str = DEFAULT_CONFIG, split: str = "test"):
        """One config's split as a ``datasets.Dataset`` (an ``_mc`` config: with its choices)."""
        if split not in SPLITS:
            raise MedlamaInputError(f"unknown split {split!r}; choose from {list(SPLITS)}")
        if is_mc(config) and self.choice_rows is not None:
            return mc_dataset([row for part in self._parts(ranking_config(config))
                               for row in self.choice_rows[part][split]], features())
        parts = self._parts(config)
        return Dataset.from_list([row for part in parts for row in self.rows[part][split]], features=features())

    def _parts(self, config: str) -> list[str]:
        if config == DEFAULT_CONFIG:
            parts = self.relation_configs()
        elif config in self.report.sources:
            parts = self.relation_configs(config)
        elif config in self.rows:
            parts = [config]
        else:
            raise MedlamaInputError(f"unknown config {config!r}; choose from {self.config_names()}")
        return parts


def _row(record: release.Record, template: str, answers: list[str]) -> dict:
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
        "answers": answers,
        "template": template,
        "query": fill_prompt(template, record.sub_label),
    }


@dataclass
class BiolamaConfig(datasets.BuilderConfig):
    """One BioLAMA config: which relations (``sources``, ``relation``) and where the release comes from."""

    #: The knowledge-base sources this config covers (``all``: every one built).
    sources: tuple[str, ...] = SOURCES
    relation: str | None = None  # one relation of the (single) source, else all of them
    #: A local ``data.tar.gz`` or extracted folder; None: ``$BIOLAMA_SOURCE``, else the download of ``url``.
    source: str | None = None
    #: The archive's expected SHA-256 (else ``$BIOLAMA_SHA256``, else the pinned one).
    sha256: str | None = None
    verify_checksums: bool = True
    url: str = release.URL
    multiple_choice: bool = False  # the rows with ``choices`` and ``label`` (the ``_mc`` configs)
    choices: int = DEFAULT_CHOICES  # distractors per query of a multiple-choice config
    choices_seed: int = DEFAULT_SEED


def _not_pinned_error(url: str) -> MedlamaInputError:
    return MedlamaInputError(
        "the SHA-256 of the BioLAMA archive is not pinned (its authors publish none), so a download cannot be "
        f"verified: pass --sha256 HASH (or set ${release.SHA256_ENV}) with the hash of a copy you trust, or "
        "--no-verify to accept the download unchecked; offline, pass --source with a local data.tar.gz or "
        "extracted folder", file=url)


def matchable_answers(record: release.Record) -> tuple[list[str], list[str]]:
    """``(kept, dropped)``: the record's gold answers (:func:`gold_answers`) that BioLAMA's answer matching
    (acc@k's ``normalized`` key) keeps, and those it reduces to nothing (``.``, ``A``, ``The``, ``-``), which no
    prediction could ever match. A record with none kept is refused (the metric refuses a query whose gold answers
    all vanish, as :meth:`~medlama.probers.query_set.QuerySet.check_gold` does), named by file, row and field as
    the release reader names a bad record."""
    answers = gold_answers(record.obj_labels, record.obj_aliases)
    kept = [answer for answer in answers if normalized(answer)]
    if not kept:
        raise MedlamaInputError(f"object labels {list(record.obj_labels)!r} (and aliases) are all nothing once "
                                "normalised for matching (lower case, no punctuation, no articles): no answer can "
                                "match them; fix or drop the record", file=record.file, row=record.line,
                                field="obj_labels")
    return kept, [answer for answer in answers if answer not in kept]


def read_biolama(found: release.BiolamaRelease, sources: Sequence[str] = SOURCES, *,
                 url: str = release.URL) -> BiolamaBuild:
    """Read and check every relation of ``sources`` in the opened release ``found`` (all splits: the report
    covers every one); any bad file or record is an error naming it. ``url``: the download URL recorded."""
    sources = [s for s in SOURCES if s in sources]
    report = BuildReport(origin=found.origin, url=url, archive_sha256=found.archive_sha256,
                         checksums_verified=found.verified, verification=found.verification, sources=sources,
                         relations={}, digest_source=found.digest_source)
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
        for rel in relations:
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
                answers = {}
                for record in records:
                    answers[record.line], dropped = matchable_answers(record)
                    report.dropped_answers += [{"config": config, "split": split, "uuid": record.uuid,
                                                "answer": answer} for answer in dropped]
                    if record.uuid in first_split:
                        report.split_overlaps.append({"config": config, "uuid": record.uuid,
                                                      "splits": [first_split[record.uuid], split]})
                    else:
                        first_split[record.uuid] = split
                rows[config][split] = [_row(record, templates[config], answers[record.line]) for record in records]
    report.empty_splits = [split for split in SPLITS if not any(parts[split] for parts in rows.values())]
    return BiolamaBuild(rows=rows, templates=templates, report=report)


class BiolamaBuilder(datasets.ArrowBasedBuilder):
    """BioLAMA as a ``datasets`` builder; after preparing, :meth:`read_release` returns what it read (rows,
    templates and the report of :func:`read_biolama`).

    ``cache_dir`` defaults to ``$MEDLAMA_CACHE/builder`` (prepared configs, the download, its extraction).
    """

    BUILDER_CONFIG_CLASS = BiolamaConfig
    BUILDER_CONFIGS = [BiolamaConfig(name=DEFAULT_CONFIG, description="BioLAMA, every source"),
                       *(BiolamaConfig(name=s, sources=(s,), description=f"BioLAMA, source {s}") for s in SOURCES),
                       BiolamaConfig(name=mc_config(DEFAULT_CONFIG), multiple_choice=True,
                                     description="BioLAMA, every source, multiple choice"),
                       *(BiolamaConfig(name=mc_config(s), sources=(s,), multiple_choice=True,
                                       description=f"BioLAMA, source {s}, multiple choice") for s in SOURCES)]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

    def __init__(self, *args, cache_dir: str | Path | None = None, **kwargs) -> None:
        super().__init__(*args, cache_dir=str(builder_cache(cache_dir)), **kwargs)
        self._read: BiolamaBuild | None = None

    def read_release(self) -> BiolamaBuild:
        """The release as this builder's preparation read it: rows per relation config and split, the manual
        prompts and the report (``read_biolama``'s result; read once, while the splits were made)."""
        if self._read is None:
            raise RuntimeError("call download_and_prepare first: the release is read while the splits are made")
        return self._read

    def _create_builder_config(self, config_name=None, custom_features=None, config_id=None, **config_kwargs):
        match = _RELATION_CONFIG.match(ranking_config(config_name or ""))
        if match and config_name not in self.builder_configs:
            # <source>_<PID>[_mc]: one relation, named by the release's folders, so made here from the default config.
            config_kwargs.update(name=config_name, sources=(match.group(1),), relation=match.group(2),
                                 multiple_choice=is_mc(config_name))
            config_name = None
        return super()._create_builder_config(config_name, custom_features, config_id, **config_kwargs)

    def _info(self) -> datasets.DatasetInfo:
        unknown = sorted(set(self.config.sources) - set(SOURCES))
        if unknown or not self.config.sources:
            raise MedlamaInputError(f"unknown source(s) {unknown}; choose from {list(SOURCES)}")
        check_choices(self.config.choices, self.config.choices_seed)
        return datasets.DatasetInfo(description=self.config.description,
                                    features=mc_features(features()) if self.config.multiple_choice else features(),
                                    homepage="https://github.com/dmis-lab/BioLAMA")

    def _download(self, dl_manager) -> release.BiolamaRelease:
        """The pinned archive through the download manager: checked, then extracted into its cache."""
        config = self.config
        expected = release.expected_sha256(config.sha256) if config.verify_checksums else None
        if expected is None and config.verify_checksums:
            raise _not_pinned_error(config.url)
        archive = download(dl_manager, config.url, offline_hint=_OFFLINE_HINT)
        with open(archive, "rb") as handle:
            head = handle.read(512)
        if not head.startswith(_GZIP_MAGIC):
            discard(dl_manager, archive)
            hint = " (a web page: Google Drive may ask for a confirmation)" if b"<html" in head.lower() else ""
            raise MedlamaInputError(f"the download is not a gzip archive{hint}; download data.tar.gz by hand "
                                    "from the link in github.com/dmis-lab/BioLAMA and pass it with --source",
                                    file=config.url)
        digest = check_sha256(dl_manager, archive, expected, url=config.url) if expected else sha256_of(Path(archive))
        root = release.find_data_root(Path(dl_manager.extract(archive)))
        if root is None:
            raise MedlamaInputError("no BioLAMA release here: expected data/{ctd,umls,wikidata}/triples_processed/ "
                                    "(the layout of data.tar.gz)", file=config.url)
        source = release.expected_source(config.sha256) if expected else "downloaded"
        verification = (f"downloaded, SHA-256 {digest} checked against the expected hash" if expected else
                        f"downloaded with --no-verify, SHA-256 {digest} not checked")
        return release.BiolamaRelease(root=root, verified=expected is not None, archive_sha256=digest,
                                      origin=config.url, verification=verification, digest_source=source)

    def _split_generators(self, dl_manager):
        config = self.config
        source = config.source or os.environ.get(release.SOURCE_ENV)
        if source:  # a local archive is extracted only while it is read: the rows are kept in memory
            with release.open_release(source, sha256=config.sha256, verify_checksums=config.verify_checksums) as found:
                read = read_biolama(found, config.sources, url=config.url)
        else:
            read = read_biolama(self._download(dl_manager), config.sources, url=config.url)
        if config.relation is not None:
            wanted = relation_config(config.sources[0], config.relation)
            if wanted not in read.rows:
                known = [relation_config(config.sources[0], rel) for rel in read.report.relations[config.sources[0]]]
                raise MedlamaInputError(f"unknown config {wanted!r}; the release's relations: {known}")
            parts = [wanted]
        else:
            parts = list(read.rows)
        self._read = read
        # a dict, not a list: datasets would take a list of gen_kwargs as shards
        return [datasets.SplitGenerator(name=split, gen_kwargs={"tables": {part: read.rows[part][split]
                                                                           for part in parts}})
                for split in SPLITS]

    def _generate_tables(self, tables: dict[str, list[dict]]):
        # pyarrow loads when this runs, not when medlama.datasets.biolama is imported
        import pyarrow as pa

        config = self.config
        for index, rows in enumerate(tables.values()):
            if rows:
                if config.multiple_choice:
                    rows = with_biolama_choices(rows, config.choices, config.choices_seed)
                yield Key(0, index), pa.Table.from_pylist(rows, schema=self.info.features.arrow_schema)


def build_biolama(source: str | Path | None = None, *, sources: Sequence[str] = SOURCES, sha256: str | None = None,
                  verify_checksums: bool = True, cache_dir: str | Path | None = None, url: str = release.URL,
                  progress: bool = True, choices: int = DEFAULT_CHOICES, choices_seed: int = DEFAULT_SEED
                  ) -> BiolamaBuild:
    """Read BioLAMA from its release: every relation of ``sources`` with its three splits.

    One fresh run of :class:`BiolamaBuilder`'s ``all`` config. ``source``: a local ``data.tar.gz`` or
    extracted folder, else ``$BIOLAMA_SOURCE``, else the download of ``url`` (cached below
    ``cache_dir``), which needs ``sha256`` (or ``$BIOLAMA_SHA256``, or a pinned hash) unless
    ``verify_checksums=False``. Any bad file or record stops the build with an error naming it. ``choices``
    distractors per query, drawn with ``choices_seed``, make the multiple-choice rows (``choice_rows``).
    """
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise MedlamaInputError(f"unknown source(s) {unknown}; choose from {list(SOURCES)}")
    check_choices(choices, choices_seed)
    builder, data = prepare_fresh(
        BiolamaBuilder, DEFAULT_CONFIG, download_config=download_config(cache_dir), progress=progress,
        sources=tuple(s for s in SOURCES if s in sources), source=None if source is None else str(source),
        sha256=sha256, verify_checksums=verify_checksums, url=url)
    read = builder.read_release()
    record = ChoicesRecord(distractors=choices, seed=choices_seed)
    drawn = {config: {split: with_biolama_choices(rows, choices, choices_seed, record, f"{mc_config(config)}/{split}")
                      for split, rows in splits.items()} for config, splits in read.rows.items()}
    record.short = {config: count for config, count in record.short.items() if count}
    return BiolamaBuild(rows=read.rows, templates=read.templates, report=read.report, datasets=data,
                        choice_rows=drawn, choices_record=record)


def load_biolama(source: str | Path | None = None, config: str = DEFAULT_CONFIG,
                 **options) -> "datasets.DatasetDict":
    """BioLAMA straight from the release as a ``DatasetDict`` (``train``, ``dev``, ``test``) of one config."""
    build = build_biolama(source, **options)
    return datasets.DatasetDict({split: build.dataset(config, split) for split in SPLITS})

