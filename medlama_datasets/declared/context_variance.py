"""The context-variance sets (Yao et al. 2023): their build (a command line of its own), card and benchmark
protocol, declared once. They are scored by ``medlama ucm`` (UCM, and acc@k with and without context), over
each triple's own candidate entities, so no query reader is declared."""

from __future__ import annotations

from medlama.datasets.benchmark import Benchmark
from medlama.datasets.licences import PRIVATE_TERMS
from medlama.datasets.registry import BuildCommand, Declaration

CONTEXT_VARIANCE = Benchmark(
    name="context-variance", configs=("sets",), relation_configs="--relations", splits=("test",),
    prompt_columns=("sequence",), candidates="each triple's candidate entities", ks=(1, 5), match="exact",
    grouping="relation")

DECLARATION = Declaration(
    name="context-variance", card="context_variance", benchmark=CONTEXT_VARIANCE, scored_by="medlama ucm",
    listed=2, terms=PRIVATE_TERMS,  # its sets may quote MIMIC notes or corpus text of undeclared licence
    build=BuildCommand(
        help="context-variance probing sets (EHR / PMC / other corpora) for UCM",
        description="Build context-variance sets (Yao et al. 2023): triples of a built MedLAMA or BioLAMA folder, "
                    "contexts retrieved from corpora (MIMIC-III / MIMIC-IV notes CSV, PMC JATS XML / text, JSON "
                    "Lines, plain text), cut into segments around the target, in every context type with its "
                    "negative-target counterpart. Each corpus is indexed once and the index reused.",
        hand_made=True))
