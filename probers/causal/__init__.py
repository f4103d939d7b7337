"""The causal-LM probers and their scoring: ``prober`` (the three causal methods), ``scoring`` (model loading
and per-token scoring), ``passes`` (passes after a prefix's cache), ``batch`` (a multiple-choice set's choices
scored together), ``trie`` (the candidates' token trie), ``search`` (best-first search) and ``budget`` (its work
against exhaustive scoring, and the switch rule)."""
