"""Probers: a query set in, ranked predictions per query out, scored by the acc@k metric module.

Every approach implements ``medlama.probers.prober.Prober`` and so shares loading
(``queries``), scoring (``base.score``), output files, tables and plots (``report``). Each benchmark is
declared once (``benchmarks``), and ``workflow`` is the one probing path of ``medlama probe`` and
``medlama.probe``.
"""
