"""Probers: the probing methods and what scores with a model. A query set in, ranked predictions per query out.

Every method implements :class:`medlama.probers.prober.Prober` and is made by
:func:`medlama.probers.registry.make_prober`. What the methods share: the masked LM's scoring (``mlm``), the
encoder's (``encoding``) and its FAISS search (``faiss_search``), candidate pools (``pools``), PLL (``pll``),
learned prompts (``learned_prompts``); the causal-LM family is :mod:`medlama.probers.causal`. Running a probe
(loading queries, resuming, writing results) is :mod:`medlama.runs`, one floor up.
"""
