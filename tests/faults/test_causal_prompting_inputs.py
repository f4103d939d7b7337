"""Kept fault cases of the causal methods' prompting and layer flags: each runs ``python -m medlama probe`` in a
subprocess with the bad input and checks the one ``medlama: error:`` line (no traceback) and that nothing was
written.

* ``--system-prompt`` without ``--chat-template``: a base model has no system turn.
* ``--few-shot`` with ``--chat-template``: not supported, said so.
* ``--few-shot 2`` where a relation has too few facts with another subject: the query and relation named,
  before any model loads.
* ``--layers 7`` on a 2-layer model: out of range, the layers it has named.
"""

from __future__ import annotations


import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
from refusals import error_here  # tests/helpers: the refusal, run in this process
from tiny_causal import save_causal

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal-prompting-faults")
    data = cv_inputs.write_probe_folder(root / "medlama")
    return data, save_causal(root / "gpt2", "gpt2")


def probe_flags(setup, out):
    data, model = setup
    return ["probe", "--data", data, "--config", "full", "--model", model, "--method", "causal-likelihood",
            "--out", out]


@pytest.mark.parametrize("flags, message", [
    (["--system-prompt", "Be exact."], "system_prompt is the system message of a chat template: give chat_template"),
    (["--few-shot", "1", "--chat-template"], "few_shot with chat_template is not supported"),
    (["--few-shot", "2"], "query 'may_treat-0001' of relation 'may_treat' has 1 facts with another subject to "
                          "draw examples from, fewer than --few-shot 2"),
    (["--layers", "7"], "layer 7 out of range"),
])
def test_bad_prompting_flags_are_one_line(setup, tmp_path, flags, message):
    out = tmp_path / "out"
    line = error_here(*probe_flags(setup, out), *flags)
    assert message in line, line
    assert not out.exists() and not (tmp_path / ".out.work").exists()
