"""The ``lm_eval`` flags printed with an export (``run_flags``) read, by lm-eval's own command line and its
configuration, as the export was written: a system message with few-shot examples written as one text keeps them
one text (lm-eval would otherwise turn ``fewshot_as_multiturn`` on by itself with ``--apply_chat_template``)."""

from __future__ import annotations

import argparse
import shlex

import pytest

from medlama.integrations.lm_eval.readme import run_flags

pytest.importorskip("lm_eval")
from lm_eval._cli.run import Run  # noqa: E402
from lm_eval.config.evaluate_config import EvaluatorConfig  # noqa: E402


def lm_eval_config(flags: str) -> EvaluatorConfig:
    """What ``lm_eval run ... FLAGS`` configures (lm-eval's own parser and precedence rules)."""
    parser = argparse.ArgumentParser(prog="lm-eval")
    Run.create(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", "--model", "hf", "--tasks", "medlama_hard", *shlex.split(flags)])
    return EvaluatorConfig.from_cli(args)


@pytest.mark.parametrize(("settings", "chat", "turns", "system"), [
    ({"few_shot": 0}, False, False, None),
    ({"few_shot": 3}, False, False, None),
    ({"few_shot": 0, "system_prompt": "Be exact."}, True, False, "Be exact."),
    ({"few_shot": 3, "system_prompt": "Be exact."}, True, False, "Be exact."),
    ({"few_shot": 3, "few_shot_as_multiturn": True}, True, True, None),
    ({"few_shot": 3, "few_shot_as_multiturn": True, "system_prompt": "Say \"yes\"."}, True, True, "Say \"yes\"."),
])
def test_lm_eval_reads_the_printed_flags_as_the_export_was_written(settings, chat, turns, system):
    config = lm_eval_config(run_flags(settings))
    assert bool(config.apply_chat_template) is chat
    if settings["few_shot"]:  # without examples lm-eval's choice changes nothing
        assert bool(config.fewshot_as_multiturn) is turns
    assert config.system_instruction == system
