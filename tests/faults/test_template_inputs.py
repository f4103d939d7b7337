"""Kept fault cases of ``medlama probe --templates FILE``: each bad template file is given to the user's
command (``python -m medlama probe ...`` in a subprocess) and must be refused with one ``medlama: error:``
line naming the file and the row (no traceback), before anything is probed or written; the Python API
(``medlama.probe(templates=...)``) refuses it with the same message.

* a template without its ``[Y]`` slot, or with two ``[X]``;
* a relation MedLAMA does not have;
* an empty template;
* a row given twice (the same relation and template, spacing aside);
* a CSV without the ``relation,template`` header, a JSON line that is not ``{"relation", "template"}``;
* a probed relation without templates, and probed relations with different numbers of them;
* a template file that is not there, or of another format; ``--prompt-column`` beside ``--templates``;
  BioLAMA.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath): the 6-query MedLAMA-shaped folder
import medlama
from medlama.core.errors import MedlamaInputError

pytestmark = pytest.mark.slow
FINDING, TREAT = cv_inputs.FINDING, cv_inputs.TREAT
GOOD = {FINDING: "[X] may have finding [Y] .", TREAT: "[X] may treat [Y] ."}

# (name, file name, content, what the error line must hold)
CASES = [
    ("missing slot", "t.csv", f"relation,template\n{FINDING},{GOOD[FINDING]}\n{TREAT},[X] may treat .\n",
     ["t.csv, row 2, field 'template'", "has 0 [Y] slot(s), needs exactly one"]),
    ("two subjects", "t.jsonl", f'{{"relation": "{FINDING}", "template": "[X] and [X] have [Y] ."}}\n',
     ["t.jsonl, row 1, field 'template'", "has 2 [X] slot(s)"]),
    ("unknown relation", "t.csv", f"relation,template\n{FINDING},{GOOD[FINDING]}\nmay_treats,[X] cures [Y] .\n",
     ["t.csv, row 2, field 'relation'", "unknown relation 'may_treats' (did you mean 'may_treat'?)"]),
    ("empty template", "t.csv", f'relation,template\n{TREAT},"   "\n',
     ["t.csv, row 1, field 'template'", "empty template"]),
    ("duplicate row", "t.csv",
     f"relation,template\n{TREAT},{GOOD[TREAT]}\n{FINDING},{GOOD[FINDING]}\n{TREAT},[X]  may treat [Y] .\n",
     ["t.csv, row 3, field 'template'", "duplicate row", "at row 1"]),
    ("bad header", "t.csv", f"relation,prompt\n{TREAT},{GOOD[TREAT]}\n",
     ["t.csv: the header must be relation,template"]),
    ("bad json line", "t.jsonl", f'{{"relation": "{TREAT}", "template": "{GOOD[TREAT]}"}}\n["{TREAT}"]\n',
     ["t.jsonl, row 2", "each line must be an object"]),
    ("relation without templates", "t.csv", f"relation,template\n{TREAT},{GOOD[TREAT]}\n",
     ["t.csv", f"relation '{FINDING}' is probed but has no template"]),
    ("unequal counts", "t.csv",
     f"relation,template\n{TREAT},{GOOD[TREAT]}\n{TREAT},[Y] treated with [X] .\n{FINDING},{GOOD[FINDING]}\n",
     ["t.csv", "different numbers of templates", f"{TREAT}: 2", f"{FINDING}: 1"]),
    ("other format", "t.txt", f"{TREAT}\t{GOOD[TREAT]}\n", ["t.txt", "CSV (.csv, header relation,template)"]),
]


def medlama_cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return cv_inputs.write_probe_folder(tmp_path_factory.mktemp("template-faults") / "medlama")


@pytest.mark.parametrize("name, file_name, content, expected", CASES, ids=[case[0] for case in CASES])
def test_a_bad_template_file_is_one_error_naming_file_and_row(data, tmp_path, name, file_name, content, expected):
    file = tmp_path / file_name
    file.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    run = medlama_cli("probe", "--data", data, "--config", "full", "--templates", file, "--out", out)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("medlama: error: ") and all(part in line for part in expected), line
    assert not out.exists() and not (tmp_path / ".out.work").exists()  # nothing probed, nothing kept
    with pytest.raises(MedlamaInputError) as error:  # the Python API: the same check, the same message
        medlama.probe(None, data, config="full", templates=file)
    assert str(error.value) == line.removeprefix("medlama: error: ")


def test_a_missing_template_file_and_a_biolama_probe_are_refused_before_any_data(tmp_path):
    run = medlama_cli("probe", "--data", tmp_path / "no-such-folder", "--templates", tmp_path / "none.csv")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == (f"medlama: error: {tmp_path / 'none.csv'}: no such template file "
                                                   "(give a CSV or JSON-lines file, or 'release')")
    with pytest.raises(MedlamaInputError, match="templates are MedLAMA's"):
        medlama.probe(None, tmp_path / "no-such-folder", dataset="biolama", templates="release")
    with pytest.raises(MedlamaInputError, match="templates must be a template file or 'release', not 3"):
        medlama.probe(None, tmp_path / "no-such-folder", templates=3)
    file = tmp_path / "t.csv"
    file.write_text(f"relation,template\n{TREAT},{GOOD[TREAT]}\n", encoding="utf-8")
    run = medlama_cli("probe", "--data", tmp_path / "no-such-folder", "--relations", TREAT, FINDING,
                      "--templates", file)  # relations given: checked before the data is read
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == (f"medlama: error: t.csv: relation '{FINDING}' is probed but has "
                                                   "no template; add its templates or leave it out with --relations")
    run = medlama_cli("probe", "--data", tmp_path / "no-such-folder", "--templates", "release", "--prompt-column",
                      "query_default")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1].startswith("medlama: error: --prompt-column picks the one prompt")
