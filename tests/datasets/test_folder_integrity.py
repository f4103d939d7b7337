"""A damaged built folder is an error naming the file, on every route that reads it (``medlama.load_medlama``,
the probe's folder loading, ``medlama probe --data DIR``), never a different number: a stray copy of a data file
(which a glob over the folder read as a second copy of a relation), a deleted file (a relation silently gone
from ``hard``), a file whose rows changed, a truncated file. MedLAMA, BioLAMA and context-variance folders."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import medlama
from medlama.datasets.folders import load_config
from medlama.core.errors import MedlamaInputError
from medlama.runs.queries import queries_from


@pytest.fixture
def copy(medlama_dir, tmp_path) -> Path:
    """A copy of the session's MedLAMA build, to damage."""
    return Path(shutil.copytree(medlama_dir, tmp_path / "medlama"))


def data_file(folder: Path, relative_dir: str, stem: str) -> Path:
    """The data file ``<stem>-<sha8>.parquet`` (named after its content) in ``relative_dir``."""
    [path] = [path for path in (folder / relative_dir).iterdir()
              if re.fullmatch(rf"{stem}(-[0-9a-f]{{8}})?\.parquet", path.name)]
    return path


def every_route_fails(folder: Path, message: str, *, whole_folder: bool = True) -> None:
    """Loading ``hard`` fails with ``message`` on each route; ``whole_folder``: so does a config without the damaged
    file (a file missing or left over means the folder is not what was built)."""
    with pytest.raises(MedlamaInputError, match=message):
        medlama.load_medlama("hard", data=folder)
    with pytest.raises(MedlamaInputError, match=message):
        queries_from(folder)
    if whole_folder:
        with pytest.raises(MedlamaInputError, match=message):
            load_config(folder, "full_gene_encodes_gene_product")
    else:
        assert load_config(folder, "full_gene_encodes_gene_product").num_rows == 1_000


def test_a_stray_copy_of_a_data_file_is_named_not_read(copy, capsys):
    from medlama.cli import main

    shutil.copy(data_file(copy, "data/hard", "may_treat"), copy / "data" / "hard" / "may_treat (1).parquet")
    every_route_fails(copy, r"'data/hard/may_treat \(1\)\.parquet' is not a file this build wrote")
    assert main(["probe", "--data", str(copy), "--limit", "1", "--quiet"]) == 2
    assert "data/hard/may_treat (1).parquet" in capsys.readouterr().err


@pytest.mark.parametrize("stray", ["candidates/hard (copy).parquet", "data/full/notes.txt",
                                   "data/hard/extra/may_treat.parquet"])
def test_other_stray_files(copy, stray):
    path = copy / stray
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data_file(copy, "data/hard", "may_treat").read_bytes())
    every_route_fails(copy, f"'{stray}' is not a file this build wrote".replace("(", r"\(").replace(")", r"\)"))


@pytest.mark.parametrize(("folder", "stem"), [("data/hard", "may_treat"), ("data/full", "occurs_after"),
                                              ("candidates", "hard")])
def test_a_deleted_file_is_named(copy, folder, stem):
    path = data_file(copy, folder, stem)
    path.unlink()
    every_route_fails(copy, f"'{path.relative_to(copy).as_posix()}' is missing: the build wrote it")


def test_a_file_with_other_rows_is_named(copy):
    path = data_file(copy, "data/hard", "may_treat")
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)  # one query gone, the name kept
    every_route_fails(copy, r"may_treat-[0-9a-f]{8}\.parquet.*has 976 rows, the build wrote 977", whole_folder=False)


def test_a_file_with_other_bytes_is_named(copy):
    path = data_file(copy, "data/hard", "may_treat")
    table = pq.read_table(path)
    names = [name.upper() for name in table.column("head_name").to_pylist()]  # same rows, other text
    pq.write_table(table.set_column(table.schema.get_field_index("head_name"), "head_name", [names]), path)
    with pytest.raises(MedlamaInputError, match=r"may_treat-[0-9a-f]{8}\.parquet.*bytes differ from what the build"):
        medlama.load_medlama("hard_may_treat", data=copy)


def test_a_truncated_parquet_file_is_named(copy):
    path = data_file(copy, "data/hard", "may_treat")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    every_route_fails(copy, r"may_treat-[0-9a-f]{8}\.parquet.*not a readable Parquet file \(truncated",
                      whole_folder=False)


def test_a_truncated_file_in_a_folder_medlama_did_not_build_is_named(tmp_path):
    from named_folders import medlama_named_folder  # tests/helpers: a card and Parquet files, no build record

    folder = medlama_named_folder(tmp_path, ["a", "b", "c"])
    rows = folder / "data" / "hard" / "rows.parquet"
    rows.write_bytes(rows.read_bytes()[:40])
    with pytest.raises(MedlamaInputError, match=r"rows\.parquet.*not a readable Parquet file"):
        load_config(folder, "hard")


def test_an_undamaged_copy_loads_as_built(copy, medlama_dir):
    assert medlama.load_medlama("hard", data=copy)["id"] == medlama.load_medlama("hard", data=medlama_dir)["id"]
    (copy / "data" / "hard" / ".DS_Store").write_bytes(b"\0")  # hidden files are never read
    assert len(queries_from(copy)) == 15_329


def test_biolama_stray_and_missing_files(biolama_dir, tmp_path):
    folder = Path(shutil.copytree(biolama_dir, tmp_path / "biolama"))
    [test] = (folder / "data" / "umls" / "UR44").glob("test-*.parquet")
    assert load_config(folder, "umls", "test").num_rows > 0
    shutil.copy(test, test.with_name("test (1).parquet"))
    with pytest.raises(MedlamaInputError, match=r"'data/umls/UR44/test \(1\)\.parquet' is not a file this build"):
        load_config(folder, "umls", "test")
    test.with_name("test (1).parquet").unlink()
    test.unlink()
    with pytest.raises(MedlamaInputError, match=r"'data/umls/UR44/test-[0-9a-f]{8}\.parquet' is missing"):
        medlama.probe(data=folder, dataset="biolama", limit=1)


def test_context_variance_stray_and_truncated_files(sets, tmp_path):
    from medlama.ucm_eval.sets import load_sets

    folder = Path(shutil.copytree(sets, tmp_path / "sets"))
    rows = len(load_sets(folder).rows)
    [target] = sorted((folder / "data").glob("*/real/target-*.parquet"))[:1]
    shutil.copy(target, target.with_name("target.parquet"))
    with pytest.raises(MedlamaInputError, match=r"real/target\.parquet' is not a file this build wrote"):
        load_sets(folder)
    target.with_name("target.parquet").unlink()
    assert len(load_sets(folder).rows) == rows
    [pools] = (folder / "pools").glob("pools-*.parquet")
    pools.write_bytes(pools.read_bytes()[:100])
    with pytest.raises(MedlamaInputError, match=r"pools-[0-9a-f]{8}\.parquet.*not a readable Parquet file"):
        load_sets(folder)
