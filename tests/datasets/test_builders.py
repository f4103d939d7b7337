"""The builder classes from Python: ``download_and_prepare`` + ``as_dataset`` give the rows of the built
folders, and the pinned download goes through the ``datasets`` download manager (file:// and loopback
HTTP copies of the release; no test reaches the network)."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading

import pytest
import yaml
from datasets import load_dataset

from medlama.datasets.biolama import BiolamaBuilder
from medlama.datasets.medlama import CONFIG_NAMES, MedlamaBuilder
from medlama.core.errors import MedlamaInputError
from medlama.loaders import medlama_release as release


@pytest.fixture
def no_source(monkeypatch):
    monkeypatch.delenv(release.SOURCE_ENV, raising=False)


def prepared(builder, split="test"):
    builder.download_and_prepare()
    return builder.as_dataset(split=split)


@pytest.mark.parametrize("config", ["hard", "hard_may_treat", "candidates_full_occurs_after"])
def test_medlama_builder_equals_the_built_folder(config, medlama_dir, medlama_source, tmp_path):
    builder = MedlamaBuilder(config_name=config, source=str(medlama_source), cache_dir=tmp_path)
    data = prepared(builder)
    assert data.to_list() == load_dataset(str(medlama_dir), config, split="test").to_list()
    assert (report := builder.check_release()).checksums_verified and report.matches_release


def test_medlama_builder_configs_are_the_folders(medlama_dir):
    meta = yaml.safe_load((medlama_dir / "README.md").read_text().split("---")[1])
    assert {c["config_name"] for c in meta["configs"]} == set(CONFIG_NAMES) == set(MedlamaBuilder.builder_configs)
    assert MedlamaBuilder.DEFAULT_CONFIG_NAME == "hard"


def test_medlama_thresholds_are_config_parameters(medlama_source, tmp_path):
    builder = MedlamaBuilder(config_name="hard_may_treat", source=str(medlama_source), cache_dir=tmp_path,
                             rouge_threshold=0.05)
    data = prepared(builder)
    assert 0 < data.num_rows < 977 and all(score < 0.05 for score in data["avg_rouge_l"])
    assert len(builder.check_release().hard_only_released) == 977 - data.num_rows
    with pytest.raises(MedlamaInputError, match=r"^match_threshold must be a number in \(0, 1\]"):
        MedlamaBuilder(config_name="hard", match_threshold=10, cache_dir=tmp_path)


def test_medlama_download_from_a_file_url(medlama_dir, medlama_source, tmp_path, no_source):
    builder = MedlamaBuilder(config_name="hard_may_treat", url=medlama_source.as_uri(), cache_dir=tmp_path)
    data = prepared(builder)
    assert (report := builder.check_release()).source == "download" and report.checksums_verified
    assert data.to_list() == load_dataset(str(medlama_dir), "hard_may_treat", split="test").to_list()


def test_medlama_download_checksum_mismatch(medlama_source, tmp_path, no_source):
    copy = tmp_path / "release"
    shutil.copytree(medlama_source, copy)
    path = copy / "2021AA" / "may_treat_1000.csv"
    path.write_bytes(path.read_bytes().replace(b"Hypertension", b"Hypotension", 1))
    builder = MedlamaBuilder(config_name="full", url=copy.as_uri(), cache_dir=tmp_path / "cache")
    with pytest.raises(MedlamaInputError, match=r"2021AA/may_treat_1000\.csv: checksum mismatch after download: "
                                                r"SHA-256 [0-9a-f]{64}, expected "
                                                + release.SHA256["2021AA/may_treat_1000.csv"]):
        builder.download_and_prepare()
    assert path.is_file()  # a file:// copy is read in place: only files in the cache are discarded


class _Folder:
    """A loopback HTTP server for a folder, counting GET requests."""

    def __init__(self, folder) -> None:
        self.requests = 0
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests += 1
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loopback(monkeypatch):
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # only 127.0.0.1 is ever asked


def test_medlama_download_is_cached_and_wrong_bytes_are_not_kept(medlama_source, tmp_path, no_source, loopback):
    cache = tmp_path / "cache"
    with _Folder(medlama_source) as server:
        prepared(MedlamaBuilder(config_name="hard_may_treat", url=server.url, cache_dir=cache))
        fetched = server.requests
        assert fetched >= len(release.SHA256)
        prepared(MedlamaBuilder(config_name="full_may_treat", url=server.url, cache_dir=cache))
        assert server.requests == fetched  # every pinned file served from the download manager's cache
    copy = tmp_path / "release"
    shutil.copytree(medlama_source, copy)
    (copy / "prompts.csv").write_text("pid,default_prompt,human_prompt\n")
    with _Folder(copy) as server:
        other = tmp_path / "other-cache"
        with pytest.raises(MedlamaInputError, match=r"prompts\.csv: checksum mismatch after download"):
            MedlamaBuilder(config_name="hard", url=server.url, cache_dir=other).download_and_prepare()
    kept = [p.read_bytes() for p in (other / "downloads").iterdir() if p.is_file() and p.suffix not in (".json", ".lock")]
    assert kept and b"pid,default_prompt,human_prompt\n" not in kept  # the bad file does not stay in the cache


@pytest.fixture(scope="module")
def biolama_folder(biolama_release_dir, biolama_dir):
    return biolama_release_dir, biolama_dir


@pytest.mark.parametrize("config", ["all", "umls", "umls_UR44", "wikidata_P780"])
def test_biolama_builder_equals_the_built_folder(config, biolama_folder, tmp_path):
    release_dir, out = biolama_folder
    builder = BiolamaBuilder(config_name=config, source=str(release_dir), cache_dir=tmp_path)
    builder.download_and_prepare()
    data = builder.as_dataset()
    assert sorted(data) == ["dev", "test", "train"]
    for split in ("train", "dev", "test"):
        # The folder's multi-relation configs glob their files, read in path order (UR116 before UR44);
        # the builder keeps the release's natural order. Same rows.
        ours, folder = data[split].to_list(), load_dataset(str(out), config, split=split).to_list()
        assert sorted(ours, key=lambda row: row["id"]) == sorted(folder, key=lambda row: row["id"]), split


def test_biolama_builder_unknown_relation(biolama_folder, tmp_path):
    release_dir, _ = biolama_folder
    with pytest.raises(MedlamaInputError, match=r"unknown config 'umls_UR1'; the release's relations: "
                                                r"\['umls_UR44', 'umls_UR116'\]"):
        BiolamaBuilder(config_name="umls_UR1", source=str(release_dir), cache_dir=tmp_path).download_and_prepare()


def test_builders_override_only_the_packaged_builder_hooks():
    """As ``datasets``' packaged builders: a config and the three hooks, no other private method of the base
    class (what a build checked comes back from a public call, not from state set while rows are generated).
    BioLAMA's relation configs are named by the release's folders, so they are made on demand."""
    import datasets

    hooks = {"_info", "_split_generators", "_generate_tables", "_generate_examples"}
    base = {name for name in dir(datasets.ArrowBasedBuilder) if name.startswith("_") and not name.startswith("__")}
    for cls, allowed in ((MedlamaBuilder, hooks), (BiolamaBuilder, hooks | {"_create_builder_config"})):
        overridden = {name for name in vars(cls) if name in base}
        assert overridden <= allowed, (cls.__name__, sorted(overridden - allowed))
