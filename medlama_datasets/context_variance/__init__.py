"""Context-variance probing sets (Yao et al., "Context Variance Evaluation of Pretrained Language
Models for Prompt-based Biomedical Knowledge Probing"): the construction core.

* :mod:`.knowledge`     triples, their correct objects (O_cor) and typed entity pools (O_pool);
* :mod:`.matching`      case-insensitive longest-match entity mentions with spaCy's PhraseMatcher;
* :mod:`.index`         an entity -> documents index built once per corpus and reused;
* :mod:`.segmentation`  segments around the centre object and every context type with its
  incremental inputs (figures 1 and 2 of the paper).

Scoring with language models, the UCM metric and dataset folders build on these.
"""

from medlama.datasets.context_variance.knowledge import Entity, EntityPool, KnowledgeBase, Triple, fill_template
from medlama.datasets.context_variance.matching import EntityMatcher, Mention
from medlama.datasets.context_variance.index import CorpusIndex, IndexedDocument
from medlama.datasets.context_variance.segmentation import (
    CONTEXT_TYPES,
    ContextInput,
    ContextSequence,
    Segment,
    Segmentation,
    build_contexts,
    resolve_pool_mentions,
    segment_document,
)

__all__ = [
    "CONTEXT_TYPES",
    "ContextInput",
    "ContextSequence",
    "CorpusIndex",
    "Entity",
    "EntityMatcher",
    "EntityPool",
    "IndexedDocument",
    "KnowledgeBase",
    "Mention",
    "Segment",
    "Segmentation",
    "Triple",
    "build_contexts",
    "fill_template",
    "resolve_pool_mentions",
    "segment_document",
]
