"""The tests read dataset cards with PyYAML's compiled safe loader (``tests/conftest.py``: ``load_dataset`` of a
built folder parses its card on every call); it must read every card medlama builds exactly as the pure-Python
``yaml.safe_load`` that huggingface_hub uses reads it."""

from __future__ import annotations

import pytest
import yaml
from huggingface_hub import repocard


def test_the_compiled_loader_is_the_one_the_card_reader_uses():
    if not yaml.__with_libyaml__:
        pytest.skip("this PyYAML has no compiled loader: huggingface_hub's own safe_load runs")
    assert getattr(repocard.yaml, "compiled_for_tests", False)
    assert repocard.yaml.safe_load("a: [1, 2]\nb: {c: d}") == {"a": [1, 2], "b": {"c": "d"}}


@pytest.mark.parametrize("built", ["medlama_dir", "biolama_dir"])
def test_every_built_card_reads_as_the_pure_python_loader_reads_it(built, request):
    folder = request.getfixturevalue(built)
    text = (folder / "README.md").read_text(encoding="utf-8")
    block = repocard.REGEX_YAML_BLOCK.search(text).group(2)
    assert repocard.yaml.safe_load(block) == yaml.load(block, Loader=yaml.SafeLoader)  # noqa: S506
