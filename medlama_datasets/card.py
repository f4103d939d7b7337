"""The one dataset-card renderer: a template in ``dataset_cards/`` plus configs, sizes, statistics and tags.

:func:`render_card` serves every builder (MedLAMA, BioLAMA, the context-variance sets); the per-dataset
functions below only gather what it needs. It runs once the data files are written: the YAML's
``dataset_info`` states, for every config, its features and the real size of each split (rows, the
Arrow bytes ``num_bytes`` as ``datasets`` counts them, the Parquet bytes ``download_size``), read from the
files themselves. The YAML is written by ``datasets``' own ``MetadataConfigs`` / ``DatasetInfosDict``,
the same code ``push_to_hub`` uses. UMLS-derived data (the ``umls`` tag) gets the Hub's gating keys in the
folder's own card (``gated: manual`` and a UMLS-licence request form), so that however the folder reaches
the Hub its card asks for the licence. The text keeps the template's prose with its
``<!-- statistics:start -->`` ... ``<!-- statistics:end -->`` block filled and any ``<!-- marker -->``
replaced; its load instructions name ``<user>/<name>``, which ``medlama push-dataset`` replaces with the
repository pushed to (:func:`name_repository`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from medlama.dataset_cards import card_path
from medlama.loaders import medlama_release as release
from medlama.datasets.licences import GATED_FIELDS, GATED_PROMPT, MIMIC_TAG, UMLS_TAG, licence_lines

STATS_BLOCK = re.compile(r"(<!-- statistics:start -->\n).*?(\n<!-- statistics:end -->)", re.DOTALL)
#: The repository in a template's load instructions, until ``push-dataset`` names the real one.
REPO_PLACEHOLDER = re.compile(r"<user>/[A-Za-z0-9_.-]+")
#: Upper bounds of the Hub's ``size_categories`` (rows), smallest first.
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"))


def fill_statistics(text: str, table: str) -> str:
    """Replace the statistics block of a card with ``table``."""
    if not STATS_BLOCK.search(text):
        raise ValueError("card template has no <!-- statistics:start --> ... <!-- statistics:end --> block")
    return STATS_BLOCK.sub(lambda m: m.group(1) + table + m.group(2), text)


def statistics_block(text: str) -> str:
    """The current content of a card's statistics block."""
    match = re.search(r"<!-- statistics:start -->\n(.*?)\n<!-- statistics:end -->", text, re.DOTALL)
    if match is None:
        raise ValueError("card has no statistics block")
    return match.group(1)


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` value for ``rows`` rows."""
    return next((name for bound, name in _SIZES if rows < bound), "n>10M")


def name_repository(text: str, repo_id: str) -> str:
    """A card's load instructions with ``<user>/<name>`` made ``repo_id`` (the repository pushed to)."""
    return REPO_PLACEHOLDER.sub(repo_id, text)


def _file_sizes(path: Path, cache: dict) -> tuple[int, int, int, object]:
    """``(rows, Arrow bytes, file bytes, features)`` of one Parquet file (read once per render)."""
    if path not in cache:
        # pyarrow and datasets load when this runs, not when the CLI parses its flags
        import pyarrow.parquet as pq
        from datasets import Features

        table = pq.read_table(path)
        cache[path] = (table.num_rows, table.nbytes, path.stat().st_size, Features.from_arrow_schema(table.schema))
    return cache[path]


def dataset_infos(folder: Path, configs: Mapping[str, Mapping[str, str | Sequence[str]]]) -> dict:
    """Config name -> ``DatasetInfo`` with features and real split sizes, from the files under ``folder``."""
    # datasets loads when this runs, not when the CLI parses its flags
    from datasets import DatasetInfo, SplitDict, SplitInfo

    cache: dict = {}
    infos = {}
    for name, splits in configs.items():
        split_dict, features, download = SplitDict(), None, 0
        for split, pattern in splits.items():
            files = ([folder / name for name in pattern] if not isinstance(pattern, str)
                     else sorted(p for p in folder.glob(pattern) if p.is_file()))
            sizes = [_file_sizes(p, cache) for p in files]
            split_dict.add(SplitInfo(name=split, num_examples=sum(s[0] for s in sizes),
                                     num_bytes=sum(s[1] for s in sizes)))
            download += sum(s[2] for s in sizes)
            features = features or next((s[3] for s in sizes), None)
        infos[name] = DatasetInfo(features=features, config_name=name, splits=split_dict, download_size=download,
                                  dataset_size=sum(s.num_bytes for s in split_dict.values()))
    return infos


def render_card(kind: str, *, folder: str | Path, configs: Mapping[str, str | Mapping[str, str | Sequence[str]]],
                default_config: str | None = None, statistics: str = "", licence_tags: Sequence[str] = (),
                replace_tags: Sequence[str] = (), replacements: Mapping[str, str] | None = None,
                rows: int | None = None, split: str = "test") -> str:
    """The README of a built folder of dataset ``kind`` (template ``dataset_cards/<kind>.md``).

    ``folder``: where the data files already are (sizes and features are read from them). ``configs``:
    config name -> its data files: one path glob (for the single split ``split``) or a mapping split ->
    path glob or list of exact paths (what a build declares: :mod:`medlama.datasets.records`).
    ``default_config`` is marked ``default``. ``statistics``: the Markdown that fills the statistics block. ``licence_tags``: tags for what this build holds that carries its own terms
    (``umls``, ``mimic``, a BioLAMA source), added to the template's tags after removing ``replace_tags``
    (the tags the build decides on, e.g. every possible source). ``replacements``: marker text -> text.
    ``rows``: the build's total rows, which sets ``size_categories`` (the template's value stays when None).
    """
    # datasets and huggingface_hub load when this runs, not when the CLI parses its flags
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    layout = {name: {split: files} if isinstance(files, str) else dict(files) for name, files in configs.items()}
    card = DatasetCard.load(card_path(kind))
    MetadataConfigs({
        name: {"data_files": [{"split": split_name, "path": _one_or_list(path)} for split_name, path in splits.items()],
               **({"default": True} if name == default_config else {})}
        for name, splits in layout.items()
    }).to_dataset_card_data(card.data)
    DatasetInfosDict(dataset_infos(Path(folder), layout)).to_dataset_card_data(card.data)
    if licence_tags or replace_tags:
        dropped = set(replace_tags) | set(licence_tags)
        card.data.tags = [tag for tag in (card.data.tags or []) if tag not in dropped] + list(licence_tags)
    if UMLS_TAG in (card.data.tags or []):
        gate(card.data)
    if rows is not None:
        card.data.size_categories = [size_category(rows)]
    card.text = fill_statistics(card.text, statistics)
    for marker, text in (replacements or {}).items():
        card.text = card.text.replace(marker, text)
    return str(card)


def _one_or_list(paths: str | Sequence[str]) -> str | list[str]:
    """A split's files as the card states them: one path as a string (as a glob was), several as a list."""
    return paths if isinstance(paths, str) else paths[0] if len(paths) == 1 else list(paths)


def gate(data, mode: str = "manual") -> None:
    """Gate a card (``DatasetCardData``) to UMLS licensees: ``gated`` and the UMLS access-request form."""
    data.gated = mode
    data.extra_gated_prompt = GATED_PROMPT
    data.extra_gated_fields = dict(GATED_FIELDS)


def render_medlama_card(build, layout: Mapping[str, Mapping[str, Sequence[str]]], stats: list[dict],
                        folder: str | Path) -> str:
    """MedLAMA's card: the configs of ``layout`` (every one with its sizes and files), the statistics table, and
    whether the release was verified against its pinned SHA-256 (:func:`medlama_verification`)."""
    # datasets.medlama (it imports datasets, pyarrow) and datasets.statistics load when this runs, not when the CLI parses its flags
    from medlama.datasets.medlama import DEFAULT_CONFIG, SPLIT
    from medlama.datasets.statistics import statistics_markdown

    return render_card("medlama", folder=folder, configs=layout, default_config=DEFAULT_CONFIG,
                       statistics=statistics_markdown(stats), split=SPLIT,
                       replacements={VERIFICATION_MARKER: medlama_verification(build.report),
                                     CHOICES_MARKER: choices_paragraph(build.choices_record),
                                     INVERSE_MARKER: inverse_pairs_list()})


#: Where MedLAMA's card lists the release's inverse relation pairs.
INVERSE_MARKER = "<!-- inverse-pairs -->"


def inverse_pairs_list() -> str:
    """The release's inverse relation pairs (:data:`medlama.loaders.medlama_release.INVERSE_PAIRS`), one a line."""
    return "\n".join(f"- `{forward}` <-> `{backward}`" for forward, backward in release.INVERSE_PAIRS)


#: Where a template says how its multiple-choice configs were drawn.
CHOICES_MARKER = "<!-- multiple-choice -->"


def choices_paragraph(record) -> str:
    """How this build drew its multiple-choice configs (``record``: its ``ChoicesRecord``): N, the seed, the rule,
    and how many queries got fewer distractors."""
    short = {config: count for config, count in record.short.items() if count}
    tail = ("Every query got all its distractors." if not short else
            "Queries whose pool had too few eligible names keep every one of them, so they have fewer choices: "
            + ", ".join(f"{count:,} in `{config}`" for config, count in short.items()) + ".")
    return (f"This build: N = {record.distractors} distractors per query (`--choices {record.distractors}`), seed "
            f"{record.seed} (`--choices-seed {record.seed}`). The draw: {record.rule}. {tail} `build_info.json` "
            "records the same (`choices`).")


#: Where a template says how its input was checked.
VERIFICATION_MARKER = "<!-- verification -->"


def medlama_verification(report) -> str:
    """How the release a MedLAMA build read was checked, for its card (``report``: the build's ``BuildReport``)."""
    if report.checksums_verified:
        return "This build's input: the release, every file verified by its pinned SHA-256."
    parts = []
    if report.checksum_mismatches:
        parts.append(f"{len(report.checksum_mismatches)} file(s) differ from that commit: "
                     + ", ".join(f"`{name}`" for name in report.checksum_mismatches))
    if report.checksums_unchecked:
        parts.append(f"{len(report.checksums_unchecked)} file(s) of it were not there to check: "
                     + ", ".join(f"`{name}`" for name in report.checksums_unchecked))
    return ("This build's input: **not verified** against the pinned SHA-256 (`--no-verify`)"
            + (f"; {'; '.join(parts)}" if parts else "") + ". Its rows, and any number probed on them, may differ "
            "from the paper's.")


# --------------------------------------------------------------------------- context-variance sets

UMLS_SENTENCE = ("\n\nThe triples are derived from the UMLS Metathesaurus (tag `{tag}`): share this build only with "
                 "UMLS licensees; `medlama push-dataset` pushes it gated.")
MIMIC_SENTENCE = ("\n\n**MIMIC notes.** The rows of {names} quote MIMIC clinical notes (tag `{tag}`), which "
                  "the PhysioNet data use agreement forbids redistributing: share this build only with credentialed "
                  "PhysioNet users; `medlama push-dataset` refuses to push it unless `--private`.")


def render_context_variance_card(build, folder: str | Path) -> str:
    """The README of a context-variance build (``ContextVarianceBuild``) whose files are in ``folder``."""
    # datasets.context_variance.layout loads (it imports datasets) when this runs, not when the CLI parses its flags
    from medlama.datasets.context_variance.layout import SPLIT

    s = build.settings
    sources = [x.source for x in build.sources]
    summary = (f"This build: triples from {build.origin}; sources {', '.join(f'`{x}`' for x in sources)}; "
               f"context types {', '.join(f'`{t}`' for t in s.context_types)}"
               f"{' with negative-target counterparts' if s.negative else ''}; at most "
               f"{s.max_docs if s.max_docs is not None else 'all'} documents per triple (seed {s.seed}); "
               f"{'all segments' if s.max_segments is None else f'at most {s.max_segments} segments'} per context; "
               f"knowledge-random mode `{s.random_mode}`.")
    if build.umls_derived:
        summary += UMLS_SENTENCE.format(tag=UMLS_TAG)
    if build.mimic_sources:
        summary += MIMIC_SENTENCE.format(names=", ".join(f"`{name}`" for name in build.mimic_sources), tag=MIMIC_TAG)
    tags = ([UMLS_TAG] if build.umls_derived else []) + ([MIMIC_TAG] if build.mimic_sources else [])
    return render_card("context_variance", folder=folder, configs=build.configs, default_config=build.default_config,
                       statistics=_context_variance_statistics(build), licence_tags=tags, split=SPLIT,
                       rows=sum(sum(x.sequences.values()) for x in build.sources),
                       replacements={"<!-- build-summary -->": summary,
                                     "<!-- source-licences -->": licence_lines(
                                         (x.source, x.source_licence) for x in build.sources)})


def _context_variance_statistics(build) -> str:
    """The card's statistics: per source, then per source and relation."""
    types = build.settings.context_types
    lines = ["| Source | Documents | Triples | Triples with contexts | Documents used | "
             + " | ".join(f"`{t}`" for t in types) + " | Negative-target sequences | Inputs | UCM records |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(types) + "---:|---:|---:|"]
    for s in build.sources:
        negative = sum(v for k, v in s.sequences.items() if k.endswith("_negative"))
        per_type = " | ".join(f"{s.sequences.get(t, 0):,}" for t in types)
        lines.append(f"| `{s.source}` ({s.format}) | {s.documents:,} | {s.triples:,} | {s.triples_with_context:,} | "
                     f"{s.documents_retrieved:,} | {per_type} | {negative:,} | {s.inputs:,} | {s.records:,} |")
    lines += ["", "| Source | Relation | Triples | With contexts | Sequences | UCM records |",
              "|---|---|---:|---:|---:|---:|"]
    for s in build.sources:
        for relation, per in sorted(s.relations.items()):
            lines.append(f"| `{s.source}` | `{relation}` | {per['triples']:,} | {per['triples_with_context']:,} | "
                         f"{per['sequences']:,} | {per['records']:,} |")
    return "\n".join(lines)
