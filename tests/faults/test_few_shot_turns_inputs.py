"""Kept fault cases of few-shot examples as chat turns (``--few-shot-as-multiturn``): each runs ``python -m medlama``
in a subprocess with the bad input and checks the one ``medlama: error:`` line (no traceback) and that nothing was
written.

* ``probe --few-shot-as-multiturn`` without ``--chat-template``, or with no examples (``--few-shot 0``): what it
  needs is said.
* ``probe --chat-template --few-shot 1 --few-shot-as-multiturn`` on a model whose tokenizer has no chat template:
  the model named.
* ``export lm-eval --few-shot-as-multiturn`` with no ``--few-shot`` (a ranking or a multiple-choice config): the
  examples are asked for, before any data is read.
"""

from __future__ import annotations


import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
from refusals import error_here  # tests/helpers: the refusal, run in this process
from tiny_causal import save_causal

pytestmark = pytest.mark.slow

NEEDS = "few_shot_as_multiturn makes few-shot examples chat turns: give chat_template (--chat-template) and few_shot"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("few-shot-turns-faults")
    return cv_inputs.write_probe_folder(root / "medlama"), save_causal(root / "gpt2", "gpt2")


@pytest.mark.parametrize("flags, message", [
    (["--few-shot", "1", "--few-shot-as-multiturn"], NEEDS),
    (["--chat-template", "--few-shot-as-multiturn"], NEEDS),
    (["--chat-template", "--few-shot", "1", "--few-shot-as-multiturn"],
     "chat_template is on but the tokenizer has no chat template (base models have none; leave it off and "
     "few_shot_as_multiturn)"),
])
def test_bad_turn_flags_of_probe_are_one_line(setup, tmp_path, flags, message):
    data, model = setup
    out = tmp_path / "out"
    line = error_here("probe", "--data", data, "--config", "full", "--model", model, "--method", "causal-likelihood",
                     "--out", out, *flags)
    assert message in line, line
    if "tokenizer" in message:
        assert str(model) in line, "the model without a chat template is named"
    assert not out.exists() and not (tmp_path / ".out.work").exists()


@pytest.mark.parametrize("flags, message", [
    (["--config", "hard", "--few-shot-as-multiturn"],
     "few_shot_as_multiturn makes few-shot examples chat turns: give few_shot N >= 1 (--few-shot N) too"),
    (["--config", "hard_mc", "--few-shot-as-multiturn"],
     "few_shot_as_multiturn makes few-shot examples chat turns: give few_shot N >= 1 (--few-shot N) too"),
])
def test_bad_turn_flags_of_the_lm_eval_export_are_one_line(setup, tmp_path, flags, message):
    data, _ = setup
    out = tmp_path / "tasks"
    line = error_here("export", "lm-eval", "--data", data, "--out", out, *flags)
    assert message in line, line
    assert not out.exists()
