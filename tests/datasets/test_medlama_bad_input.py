"""Bad input to the MedLAMA builder: clear errors naming file, row and field; earlier builds kept."""

from __future__ import annotations

import csv
import json
import re
import shutil
import tarfile

import pytest

from medlama.core.atomic import write_owner
from medlama.cli import main
from medlama.datasets.hardness import HardnessRule
from medlama.datasets.medlama import build_medlama
from medlama.datasets.medlama_folder import write_medlama
from medlama.core.errors import MedlamaInputError
from medlama.loaders import medlama_release as release


@pytest.fixture
def copy(tmp_path, medlama_source):
    """A writable copy of the release."""
    target = tmp_path / "release"
    shutil.copytree(medlama_source, target)
    return target


def rewrite(path, edit):
    """Rewrite a CSV through ``edit(header, rows)``, which changes them in place."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    edit(rows[0], rows[1:])
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def keep_rows(path, keep):
    """Rewrite a CSV keeping only the data rows for which ``keep(record)`` is true."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header] + [row for row in rows if keep(dict(zip(header, row)))])


def set_cell(path, row, column, value):
    def edit(header, rows):
        rows[row - 1][header.index(column)] = value
    rewrite(path, edit)


@pytest.fixture
def earlier_build(tmp_path):
    out = tmp_path / "out" / "medlama"
    out.mkdir(parents=True)
    (out / "README.md").write_text("earlier build")
    (out / "build_info.json").write_text("{}")  # with the ownership record: an earlier build, which may be replaced
    write_owner(out, "build medlama")
    return out


def assert_intact(out):
    assert (out / "README.md").read_text() == "earlier build"
    assert [p.name for p in out.parent.iterdir() if p.name != ".medlama.lock"] == ["medlama"]  # no staging folder left behind


def test_missing_file(copy, earlier_build):
    (copy / "2021AA" / "may_treat_1000.csv").unlink()
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: missing file"):
        write_medlama(earlier_build, copy, progress=False)
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: missing file"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_renamed_column(copy, earlier_build):
    rewrite(copy / "2021AA" / "may_prevent_1000.csv", lambda header, rows: header.__setitem__(5, "tail_name"))
    with pytest.raises(MedlamaInputError) as error:
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    message = str(error.value)
    assert "may_prevent_1000.csv" in message
    assert "missing column(s) ['tail_names']" in message and "unexpected column(s) ['tail_name']" in message
    assert_intact(earlier_build)


def test_empty_answer_list(copy, earlier_build):
    path = copy / "2021AA" / "may_treat_1000.csv"
    set_cell(path, 3, "tail_names", "")
    set_cell(path, 3, "tail_names_list", "[]")
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv, row 3, field 'tail_names': empty answer list"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_malformed_answer_list(copy, earlier_build):
    set_cell(copy / "2021AA" / "occurs_after_1000.csv", 7, "tail_names_list", "['Surgery', 'Trauma'")
    with pytest.raises(MedlamaInputError,
                       match=r"occurs_after_1000\.csv, row 7, field 'tail_names_list': not a Python list literal"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_answer_count_disagrees(copy):
    set_cell(copy / "2021AA" / "may_treat_1000.csv", 2, "tail_names_len", "9")
    with pytest.raises(MedlamaInputError, match=r"row 2, field 'tail_names_len': tail_names_len is 9"):
        build_medlama(copy, verify_checksums=False, progress=False)


def test_checksum_mismatch(copy, earlier_build):
    path = copy / "2021AA" / "may_treat_1000.csv"
    path.write_bytes(path.read_bytes().replace(b"Hypertension", b"Hypotension", 1))
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: checksum mismatch: SHA-256 [0-9a-f]{64}"):
        write_medlama(earlier_build, copy, progress=False)
    assert_intact(earlier_build)


def break_prompt(release_root, column, prompt):
    """Give may_treat (row 19 of prompts.csv) another prompt in ``column``."""
    def edit(header, rows):
        for row in rows:
            if row[0] == "may_treat":
                row[header.index(column)] = prompt
    rewrite(release_root / "prompts.csv", edit)


@pytest.mark.parametrize("column, prompt, problem", [
    ("human_prompt", "[X] might treat .", r"has 0 \[Y\] slot"),
    ("human_prompt", "it might treat [Y] .", r"has 0 \[X\] slot"),
    ("default_prompt", "[X] treats [X] and [Y] .", r"has 2 \[X\] slot"),
])
def test_prompt_without_slot(copy, earlier_build, column, prompt, problem):
    break_prompt(copy, column, prompt)
    with pytest.raises(MedlamaInputError) as error:
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert re.match(rf"{re.escape(str(copy / 'prompts.csv'))}, row 19, field '{column}': "
                    rf"prompt {re.escape(repr(prompt))} {problem}\(s\), needs exactly one$", str(error.value))
    assert_intact(earlier_build)


def test_source_from_the_environment(copy, tmp_path, monkeypatch, capsys):
    # Without --source the build reads $MEDLAMA_SOURCE: the error names a file of that copy.
    break_prompt(copy, "human_prompt", "it might treat [Y] .")
    monkeypatch.setenv("MEDLAMA_SOURCE", str(copy))
    out = tmp_path / "o"
    assert main(["build", "medlama", "--out", str(out), "--no-verify"]) == 2
    assert f"medlama: error: {copy / 'prompts.csv'}, row 19, field 'human_prompt'" in capsys.readouterr().err
    # --source wins over the variable.
    assert main(["build", "medlama", "--out", str(out), "--no-verify", "--source", str(tmp_path / "elsewhere")]) == 2
    assert f"medlama: error: {tmp_path / 'elsewhere'}: MedLAMA source not found" in capsys.readouterr().err
    assert not out.exists()


def test_changed_released_score_reported(copy, tmp_path, capsys):
    # may_treat row 5 ("riboflavin 5'-phosphate"): avg_match 0.0 in the release and recomputed.
    path = copy / "2021AA" / "may_treat_1000.csv"
    set_cell(path, 5, "avg_match", "0.75")
    out = tmp_path / "o"
    assert main(["build", "medlama", "--out", str(out), "--source", str(copy), "--no-verify"]) == 0
    printed = capsys.readouterr().out
    assert "hardness scores recomputed: 1 differ from the release by more than 1e-6" in printed
    assert f"  may_treat-0005 ({path}, row 5): avg_match released 0.750000, recomputed 0.000000\n" in printed
    report = json.loads((out / "build_info.json").read_text())["report"]
    assert report["score_mismatches"] == [{"id": "may_treat-0005", "file": str(path), "row": 5,
                                           "score": "avg_match", "released": 0.75, "recomputed": 0.0}]
    assert report["hard_only_derived"] == report["hard_only_released"] == []  # decided on recomputed scores


@pytest.mark.parametrize("option, value", [("--match-threshold", "0"), ("--rouge-threshold", "-0.1"),
                                           ("--match-threshold", "10"), ("--rouge-threshold", "nan"),
                                           ("--match-threshold", "inf")])
def test_bad_threshold_option(option, value, tmp_path, capsys):
    out = tmp_path / "o"
    status = main(["build", "medlama", "--out", str(out), "--source", str(tmp_path / "nowhere"), f"{option}={value}"])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err == f"medlama: error: {option} must be a number in (0, 1] (the scores lie in [0, 1] and a query is " \
                  f"hard when they are below the thresholds), got {float(value)!r}\n"
    assert not out.exists()


@pytest.mark.parametrize("rule, name, shown", [(HardnessRule(0.1, 0.0), "rouge_threshold", "0.0"),
                                               (HardnessRule(1.5, 0.1), "match_threshold", "1.5"),
                                               (HardnessRule("0.1", 0.1), "match_threshold", "'0.1'")])
def test_bad_threshold_in_python(medlama_source, rule, name, shown):
    # (0.1, 0.0) used to fail deep in `datasets` ("Keys mismatch") once a relation had no hard row.
    with pytest.raises(MedlamaInputError, match=rf"^{name} must be a number in \(0, 1\] .*, got {re.escape(shown)}$"):
        build_medlama(medlama_source, rule=rule, progress=False)


def test_no_hard_query_at_all(copy, earlier_build):
    # Keep only rows with a score >= 0.01 in every relation: thresholds of 0.01 leave the hard set empty.
    for path in (copy / "2021AA").glob("*_hard.csv"):
        path.unlink()  # a shortened full set no longer holds the released hard rows
    for path in (copy / "2021AA").glob("*_1000.csv"):
        keep_rows(path, lambda record: max(float(record["avg_match"]), float(record["avg_rouge_l"])) >= 0.01)
    with pytest.raises(MedlamaInputError, match=r"no query is hard with match threshold 0\.01 and ROUGE-L threshold "
                                                r"0\.01: .*nothing was written"):
        write_medlama(earlier_build, copy, rule=HardnessRule(0.01, 0.01), verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_cli_prints_error_without_traceback(copy, tmp_path, capsys):
    set_cell(copy / "2021AA" / "may_treat_1000.csv", 4, "tail_cuis_list", "not a list")
    status = main(["build", "medlama", "--out", str(tmp_path / "o"), "--source", str(copy), "--no-verify"])
    err = capsys.readouterr().err
    last_line = err.strip().splitlines()[-1]  # after the progress bar
    assert status == 2
    assert last_line.startswith("medlama: error: ") and "row 4, field 'tail_cuis_list'" in last_line
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_source_not_a_release(tmp_path):
    with pytest.raises(MedlamaInputError, match="no MedLAMA release here"):
        build_medlama(tmp_path, progress=False)
    with pytest.raises(MedlamaInputError, match="MedLAMA source not found"):
        build_medlama(tmp_path / "nowhere", progress=False)


def test_archive_source(copy, tmp_path):
    archive = tmp_path / "medlama.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # the layout of a GitHub archive of the repository
        tar.add(copy, arcname=f"medlama-{release.COMMIT}/data/medlama")
    with release.open_release(archive) as found:
        assert found.verified and (found.root / "prompts.csv").is_file()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(MedlamaInputError, match=r"truncated\.tar\.gz: cannot read archive"):
        with release.open_release(truncated):
            pass


def test_probe_unknown_method_refused_before_loading_queries(monkeypatch, tmp_path, capsys):
    import medlama.runs.queries as queries_module

    def load_queries(source):
        raise AssertionError("queries loaded (maybe MedLAMA built) before the method names were checked")

    # Patched where the command looks it up on each call, so no command module keeps the patched one.
    monkeypatch.setattr(queries_module, "load_queries", load_queries)
    status = main(["probe", "--method", "retrieval", "foo", "--data", str(tmp_path), "--out", str(tmp_path / "o")])
    assert status == 2
    assert capsys.readouterr().err == ("medlama: error: unknown --method 'foo'; known methods: causal-constrained, "
                                       "causal-generate, causal-likelihood, generative, mask-average, mask-predict, "
                                       "masked-likelihood, retrieval\n")
