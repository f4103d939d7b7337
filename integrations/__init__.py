"""medlama's benchmarks inside the harnesses researchers already use (installed as ``medlama.integrations``).

Each module renders the queries and applies the candidate rule exactly as :mod:`medlama.probers` does, so that a
score computed by the harness is the score ``medlama probe`` prints for the same model and queries. The harnesses
are optional extras; their modules import them only when called. :class:`ProbeCallback` (probing a model while a
``transformers`` or sentence-transformers trainer trains it: :mod:`medlama.integrations.probe_callback`) loads
on first use, so that importing this package does not load transformers.
"""

__all__ = ["ProbeCallback"]


def __getattr__(name: str):
    if name == "ProbeCallback":
        # transformers and torch load on first use of the callback, not with this package
        from medlama.integrations.probe_callback import ProbeCallback

        return ProbeCallback
    raise AttributeError(f"module 'medlama.integrations' has no attribute {name!r}")
