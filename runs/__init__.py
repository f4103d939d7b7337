"""The probe run: ``medlama probe`` and ``medlama.probe`` take one path, :func:`medlama.runs.workflow.probe`.

Where the queries come from (``queries``, ``biolama_queries``; each benchmark declared once in ``benchmarks``),
the checks before the long work (``arguments``, ``preflight``), the resumable plan (``resume``), the result and
its scores (``result``, ``scores``), and what a run writes (``outputs``, ``tables``, ``plots``).
"""
