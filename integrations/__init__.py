"""medlama's benchmarks inside the harnesses researchers already use (installed as ``medlama.integrations``).

Each module renders the queries and applies the candidate rule exactly as :mod:`medlama.probers` does, so that a
score computed by the harness is the score ``medlama probe`` prints for the same model and queries. The harnesses
are optional extras; their modules import them only when called.
"""
