"""A probe run written by hand for the inverse-consistency tests: both relations of the gene <-> gene product
pair, each query naming its fact (``head_cui``, ``answer_cuis``), with the expected counts worked out by hand.

Facts probed both ways (G = gene, P = product), right in r (the gene's query) / right in r' (the product's):

* G1 -> P1: "Abc protein" is the gene's top-1 (right @1); "ABC Gene" is the product's 2nd (right @3 only);
* G2 -> P2: "Def protein" is 2nd (right @3 only); "DEF Gene" is 1st (right @1);
* G3 -> P3: "Ghi protein" is not in the top 3 (never right); "GHI Gene" is 1st (right @1).

Not paired: G2 -> P9 (P9 not probed), G4 -> G4 (subject is its object), P5 -> G5 (G5 not probed).
So at k = 1: both 0, r only 1, r' only 2, neither 0; at k = 3: both 2, r only 0, r' only 1, neither 0.
"""

from __future__ import annotations

import json
from pathlib import Path

R, R_INV = "gene_encodes_gene_product", "gene_product_encoded_by_gene"
#: (id, relation, head_cui, head_name, [(answer cui, answer name)], predictions)
QUERIES = [
    ("g1", R, "G1", "ABC Gene", [("P1", "Abc protein")], ["Abc protein", "x", "y"]),
    ("g2", R, "G2", "DEF Gene", [("P2", "Def protein"), ("P9", "Other protein")], ["y", "Def protein", "z"]),
    ("g3", R, "G3", "GHI Gene", [("P3", "Ghi protein")], ["z", "w", "q"]),
    ("g4", R, "G4", "LSP1 Gene", [("G4", "LSP1 Gene")], ["LSP1 Gene", "w", "q"]),
    ("p1", R_INV, "P1", "Abc protein", [("G1", "ABC Gene"), ("E", "Enzyme Gene")], ["Enzyme Gene", "ABC Gene", "q"]),
    ("p2", R_INV, "P2", "Def protein", [("G2", "DEF Gene")], ["DEF Gene", "q", "w"]),
    ("p3", R_INV, "P3", "Ghi protein", [("G3", "GHI Gene")], ["GHI Gene", "q", "w"]),
    ("p5", R_INV, "P5", "Jkl protein", [("G5", "JKL Gene")], ["JKL Gene", "q", "w"]),
]
#: {k: {outcome: count}} over the three paired facts (module docstring).
EXPECTED = {1: {"both": 0, "forward_only": 1, "backward_only": 2, "neither": 0},
            3: {"both": 2, "forward_only": 0, "backward_only": 1, "neither": 0}}


def write_fact_run(folder: Path, label: str = "run", ks=(1, 3), *, drop: str | None = None,
                   queries=QUERIES) -> Path:
    """``folder`` as `medlama probe` writes one run of :data:`QUERIES` (``drop``: a key left out of every row)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"dataset": "medlama", "config": "hard", "fingerprint": "hand-made", "candidates": {"rule": "evaluated"}}
    (folder / "results.json").write_text(json.dumps([{"label": label, "metrics": {"k": list(ks), "match": "exact"},
                                                      "settings": {"method": "hand"}, "data": data}]))
    rows = []
    for qid, relation, cui, name, answers, predictions in queries:
        gold = [answer for _, answer in answers]
        row = {"run": label, "id": qid, "relation": relation, "gold": gold, "predictions": predictions,
               **{f"hit@{k}": any(p in gold for p in predictions[:k]) for k in ks},
               "input": f"{name} {relation} [Y] .", "head_cui": cui, "head_name": name,
               "answer_cuis": [c for c, _ in answers]}
        row.pop(drop, None)
        rows.append(row)
    (folder / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder
