"""The optional extra ``medlama[harness]`` (lm-evaluation-harness) for the tests that run lm-eval itself: CI
installs it, so there a missing one fails; elsewhere (a third party's clone) the module is skipped."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_lm_eval() -> None:
    """Call at a test module's top, before importing lm-eval."""
    if importlib.util.find_spec("lm_eval") is not None:
        return
    if os.environ.get("CI"):
        pytest.fail("lm-evaluation-harness is not installed: install medlama[harness]", pytrace=False)
    pytest.skip("lm-evaluation-harness (the extra medlama[harness]) is not installed", allow_module_level=True)
