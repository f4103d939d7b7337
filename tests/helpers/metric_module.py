"""Checks every metric module (``metrics/<name>/``) must pass: its ``>>>`` examples run as a reader would, from
the repository root; its script is self-contained (it is published alone); its card has the sections of an
``evaluate`` card."""

from __future__ import annotations

import doctest
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import evaluate

REPO = Path(__file__).resolve().parents[2]


def run_doctest(text: str, name: str, monkeypatch, cache_dir) -> tuple[doctest.TestResults, str]:
    """Run the ``>>>`` examples in ``text`` from the repository root; return (results, report)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(evaluate.config, "HF_METRICS_CACHE", cache_dir)
    test = doctest.DocTestParser().get_doctest(text, {"evaluate": evaluate}, name, None, 0)
    report: list[str] = []
    results = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test, out=report.append)
    return results, "".join(report)


def assert_self_contained(script: Path) -> None:
    """evaluate 0.4.6 scans one ``import`` per line; the script is published alone, so it imports no medlama
    and no library its ``requirements.txt`` does not list."""
    from evaluate.loading import get_imports

    text = script.read_text(encoding="utf-8")
    assert not re.search(r"^\s*import\s+\w+(\.\w+)*\s*,", text, flags=re.M), "one import per line"
    imports = get_imports(str(script))
    assert "medlama" not in {name for _, name, _, _ in imports}
    libraries = {name for kind, name, _, _ in imports if kind == "library"}
    assert libraries - set(sys.stdlib_module_names) <= {"datasets", "evaluate", "numpy"}
    requirements = (script.parent / "requirements.txt").read_text(encoding="utf-8")
    for library in libraries - set(sys.stdlib_module_names):
        assert library in requirements


def assert_card_sections(card: str) -> None:
    """The Space front matter and the sections of an ``evaluate`` metric card."""
    front = card.split("---")[1]
    for key in ("title:", "emoji:", "colorFrom:", "colorTo:", "sdk: gradio", "sdk_version:", "app_file: app.py",
                "pinned: false", "- evaluate", "- metric", "description:"):
        assert key in front, key
    for section in ("## Metric Description", "## How to Use", "### Inputs", "### Output Values", "### Examples",
                    "## Limitations and Bias", "## Citation"):
        assert section in card, section


#: Run in a fresh interpreter: medlama made unimportable, the copied folder loaded by path, the result printed.
_ALONE = """
import json, sys
sys.modules["medlama"] = None  # any import of medlama by the script now raises ImportError
import evaluate
module = evaluate.load(sys.argv[1], keep_in_memory=True, cache_dir=sys.argv[2])
print(json.dumps(module.compute(**json.loads(sys.argv[3]))))
"""


def compute_alone(module_dir: Path, tmp_path: Path, args: dict) -> dict:
    """``compute(**args)`` of the metric folder copied on its own, as after a push to the Hub: loaded by path in
    a fresh interpreter, from a folder away from the repository, with ``medlama`` unimportable."""
    alone = tmp_path / "alone" / module_dir.name
    shutil.copytree(module_dir, alone)
    done = subprocess.run([sys.executable, "-c", _ALONE, str(alone), str(tmp_path / "cache"), json.dumps(args)],
                          cwd=alone.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
