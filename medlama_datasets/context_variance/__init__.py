"""Context-variance probing sets (Yao et al., "Context Variance Evaluation of Pretrained Language
Models for Prompt-based Biomedical Knowledge Probing").

The construction core:

* :mod:`.knowledge`     triples, their correct objects (O_cor) and typed entity pools (O_pool);
* :mod:`.kb_adapters`   knowledge bases from built MedLAMA and BioLAMA folders;
* :mod:`.matching`      case-insensitive longest-match entity mentions with spaCy's PhraseMatcher;
* :mod:`.index`         an entity -> documents index built once per corpus and reused: its reader
  (:mod:`.index.corpus_index`), on-disk format (:mod:`.index.format`), the ``datatrove`` pipeline that builds
  it from corpus files (:mod:`.index.pipeline`, its steps :mod:`.index.steps`), the in-process writer
  (:mod:`.index.build`) and the surface-form table (:mod:`.index.forms`);
* :mod:`.segmentation`  segments around the centre object (figure 1 of the paper);
* :mod:`.contexts`      every context type built from the segments, with its incremental inputs (figure 2);
* :mod:`.rows`          a stored row's inputs rebuilt from its segments and layout (:func:`with_inputs`).

The dataset:

* :mod:`.settings`      typed settings: :class:`BuildSettings`, :class:`CorpusSpec`, :class:`KnowledgeSpec`;
* :mod:`.layout`        schemas, config names and the files behind them;
* :mod:`.triple_rows`   the per-triple work (retrieval, contexts, rows) in worker processes;
* :mod:`.builder`       :class:`ContextVarianceBuilder`, the ``datasets`` builder class;
* :mod:`.export`        :func:`build_context_variance`: every config of the builder written into a dataset
  folder, the one way a folder is built (``medlama build context-variance``);
* :mod:`.stats`         the build's counts (its card: :func:`medlama.datasets.card.render_context_variance_card`).

The builder and the export import ``datasets``; they are loaded when first asked for, so that the
worker processes of a build (which import this package) stay small.
"""

from medlama.datasets.context_variance.knowledge import Entity, EntityPool, KnowledgeBase, Triple, fill_template
from medlama.datasets.context_variance.matching import EntityMatcher, Mention
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex, IndexedDocument
from medlama.datasets.context_variance.segmentation import (Segment, Segmentation, resolve_pool_mentions,
                                                             segment_document)
from medlama.datasets.context_variance.contexts import CONTEXT_TYPES, ContextInput, ContextSequence, build_contexts
from medlama.datasets.context_variance.rows import row_inputs, with_inputs
from medlama.datasets.context_variance.settings import BuildSettings, CorpusSpec, KnowledgeSpec

_LAZY = {
    "ContextVarianceBuilder": "builder",
    "ContextVarianceConfig": "builder",
    "build_context_variance": "export",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib  # the builder and the export import datasets: loaded when first asked for (see above)

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTEXT_TYPES",
    "BuildSettings",
    "ContextInput",
    "ContextSequence",
    "ContextVarianceBuilder",
    "ContextVarianceConfig",
    "CorpusIndex",
    "CorpusSpec",
    "Entity",
    "EntityMatcher",
    "EntityPool",
    "IndexedDocument",
    "KnowledgeBase",
    "KnowledgeSpec",
    "Mention",
    "Segment",
    "Segmentation",
    "Triple",
    "build_context_variance",
    "build_contexts",
    "fill_template",
    "resolve_pool_mentions",
    "row_inputs",
    "segment_document",
    "with_inputs",
]
