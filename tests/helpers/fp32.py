"""Tolerances for float32 results compared with another computation of the same quantity.

A model's score (a sum or mean of token log-probabilities, a distance between vectors) computed two ways
in float32 (other batching, padding, a KV cache, one text at a time) differs by rounding alone: each term
is off by a few float32 epsilons of the magnitudes it is made from, and a sum of ``terms`` terms by up to
``terms`` times that. An absolute tolerance such as 1e-5 ignores that scale: it is loose for a score of
-0.1 and fails, on a busy machine whose threads split the sums otherwise, for one of -70 or -780. These
tolerances grow with the scores and the number of terms instead; float64 checks stay strict where they are.

Importable as ``fp32`` (``tests/helpers`` is on pytest's ``pythonpath``).
"""

from __future__ import annotations

import numpy as np

#: float32's machine epsilon (2**-23), the same as ``torch.finfo(torch.float32).eps``.
EPS32 = float(np.finfo(np.float32).eps)

#: Slack over the rounding bound: each term's own error is a few epsilons of its inputs (matrix products
#: over the hidden size, a log-softmax over the vocabulary), never hundreds.
FACTOR = 8.0


def fp32_sum_atol(*values, terms: int, factor: float = FACTOR) -> float:
    """The absolute tolerance for float32 sums (or means) of ``terms`` terms whose values are ``values``
    (arrays or numbers, all compared with one another): ``factor * terms * eps32 * max |value|``."""
    if terms < 1:
        raise ValueError(f"a sum has at least one term, got {terms}")
    scale = max(float(np.max(np.abs(np.asarray(value, dtype=np.float64)))) for value in values)
    return factor * terms * EPS32 * scale
