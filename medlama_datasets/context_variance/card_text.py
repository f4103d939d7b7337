"""The card of a context-variance build: the ``dataset_cards/context_variance.md`` template filled in.

:func:`render_context_variance_card` is the one function: it adds the configs and their schemas
(through the shared card renderer, :func:`medlama.datasets.card.render_card`), the statistics tables,
the build summary, and the licence sentences with the tags ``medlama push-dataset`` gates on
(:mod:`medlama.datasets.licences`): ``umls`` for triples derived from the UMLS Metathesaurus, ``mimic``
for rows quoting MIMIC-III notes.
"""

from __future__ import annotations

from medlama.datasets.context_variance.layout import POOLS, SPLIT, config_rows, features, pool_features
from medlama.datasets.context_variance.stats import ContextVarianceBuild
from medlama.datasets.licences import MIMIC_TAG, UMLS_TAG

UMLS_SENTENCE = ("\n\nThe triples are derived from the UMLS Metathesaurus (tag `{tag}`): share this build only with "
                 "UMLS licensees; `medlama push-dataset` pushes it gated.")
MIMIC_SENTENCE = ("\n\n**MIMIC-III notes.** The rows of {names} quote MIMIC-III clinical notes (tag `{tag}`), which "
                  "the PhysioNet data use agreement forbids redistributing: share this build only with credentialed "
                  "PhysioNet users; `medlama push-dataset` refuses to push it unless `--private`.")


def render_context_variance_card(build: ContextVarianceBuild) -> str:
    """The README of a built folder: configs, schemas, statistics, build summary and licence tags."""
    from datasets import DatasetInfo, SplitDict, SplitInfo
    from huggingface_hub import DatasetCard

    from medlama.datasets.card import render_card

    s = build.settings
    sources = [x.source for x in build.sources]
    infos = {}
    for name in build.configs:
        if name == POOLS:
            infos[name] = DatasetInfo(features=pool_features(), config_name=name, splits=None)
            continue
        wanted = config_rows(name, sources, s.context_types, s.negative)
        stat = next(x for x in build.sources if x.source == wanted.source)
        rows = sum(stat.sequences.get(t + ("_negative" if negative else ""), 0)
                   for t in wanted.context_types for negative in wanted.kinds)
        splits = SplitDict()
        splits.add(SplitInfo(name=SPLIT, num_examples=rows))
        infos[name] = DatasetInfo(features=features(), config_name=name, splits=splits)
    text = render_card("context_variance", build.configs, build.default_config, infos, _statistics(build),
                       split=SPLIT)
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
    total = sum(sum(x.sequences.values()) for x in build.sources)
    size = ("n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else "10K<n<100K" if total < 100_000
            else "100K<n<1M" if total < 1_000_000 else "1M<n<10M")
    text = text.replace("size_categories:\n- n<1K", f"size_categories:\n- {size}", 1)
    text = text.replace("<!-- build-summary -->", summary)
    wanted_tags = ([UMLS_TAG] if build.umls_derived else []) + ([MIMIC_TAG] if build.mimic_sources else [])
    if not wanted_tags:
        return text
    card = DatasetCard(text)
    card.data.tags = [tag for tag in (card.data.tags or []) if tag not in wanted_tags] + wanted_tags
    return str(card)


def _statistics(build: ContextVarianceBuild) -> str:
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
