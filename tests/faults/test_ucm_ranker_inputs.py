"""A bad ranker setting of ``medlama ucm`` (the mask-predict decoding, mask-average, retrieval, the batch size), run
as a user runs it (``python -m medlama``): one ``medlama: error:`` line naming the setting, exit status 2, nothing
written, before the sets are read; ``medlama.ucm`` refuses the same setting by the same name with the same words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: flags -> the same setting as medlama.ucm's keyword, and the words of the refusal
CASES = [(["--max-masks", "0"], "max_masks=0", "max masks must be >= 1, got 0"),
         (["--max-masks", "4", "--max-iterations", "2"], "max_masks=4, max_iterations=2",
          "max iterations (2) must be >= max masks (4)"),
         (["--max-tokens", "0"], "max_tokens=0", "max tokens must be >= 1, got 0"),
         (["--query-max-length", "0"], "query_max_length=0", "setting 'query_max_length' must be at least 1, got 0")]

API = """
import sys
import medlama
from medlama.core.errors import MedlamaInputError
try:
    medlama.ucm("nowhere", out="api", {keywords})
except MedlamaInputError as error:
    print(f"medlama: error: {{error}}", file=sys.stderr)
    sys.exit(2)
"""


def refused(cwd: Path, words: list[str]) -> str:
    """The last stderr line of a refused run, checked: exit status 2, no traceback, nothing written."""
    run = subprocess.run([sys.executable, "-P", *words], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert sorted(p.name for p in cwd.iterdir()) == []
    return run.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("flags, keywords, words", CASES)
def test_a_bad_ranker_setting_is_refused_alike_by_the_command_and_the_api(flags, keywords, words, tmp_path):
    said = refused(tmp_path, ["-m", "medlama", "ucm", "--sets", "nowhere", *flags, "--out", "cli"])
    assert said.startswith("medlama: error: ") and words in said
    assert refused(tmp_path, ["-c", API.format(keywords=keywords)]) == said
