"""The BioLAMA builder on a fixture release in the exact ``data.tar.gz`` layout: local paths, the verified
download (loopback HTTP server and file:// URL), configs, schema, rows, card and CLI."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import tarfile
import threading
from pathlib import Path

import pytest
import yaml
from datasets import List, Value, load_dataset

from medlama.cli import main
from medlama.datasets.biolama import build_biolama, features, load_biolama
from medlama.datasets.biolama_folder import write_biolama
from medlama.datasets.card import statistics_block
from medlama.core.errors import MedlamaInputError
from medlama.loaders import biolama_release as release


@pytest.fixture(scope="module")
def archive(biolama_fx, biolama_release_dir, tmp_path_factory) -> Path:
    return biolama_fx.write_archive(tmp_path_factory.mktemp("archive") / "data.tar.gz", biolama_release_dir / "data")


@pytest.fixture(scope="module")
def archive_sha(archive) -> str:
    return hashlib.sha256(archive.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(archive, archive_sha, tmp_path_factory):
    out = tmp_path_factory.mktemp("built") / "biolama"
    build, stats = write_biolama(out, archive, sha256=archive_sha, progress=False)
    return out, build, stats


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The medlama cache in ``tmp_path``; the download manager may reach the loopback servers of these tests."""
    import datasets.config

    monkeypatch.setenv("MEDLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BIOLAMA_SOURCE", raising=False)
    monkeypatch.delenv("BIOLAMA_SHA256", raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # only 127.0.0.1 is ever asked
    return tmp_path / "cache"


def downloads(cache: Path) -> list[Path]:
    """The files the download manager holds in the medlama cache (its notes and locks left out)."""
    folder = cache / "builder" / "downloads"
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix not in (".json", ".lock")) \
        if folder.is_dir() else []


class _Server:
    """A loopback HTTP server for one file, counting requests."""

    def __init__(self, payload: bytes, content_type: str = "application/gzip") -> None:
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data.tar.gz"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_configs_and_splits_load_offline(biolama_fx, built):
    out, _, _ = built
    for config, source in (("all", None), ("ctd", "ctd"), ("umls", "umls"), ("wikidata", "wikidata")):
        data = load_dataset(str(out), config)
        assert sorted(data) == ["dev", "test", "train"]
        for split in ("train", "dev", "test"):
            assert data[split].num_rows == biolama_fx.counts(source, split), (config, split)
    assert load_dataset(str(out), split="test").num_rows == biolama_fx.counts(None, "test")  # `all` is the default
    for source, relations in biolama_fx.RELEASE.items():
        for rel in relations:
            data = load_dataset(str(out), f"{source}_{rel}")
            assert [data[s].num_rows for s in ("train", "dev", "test")] == [3, 2, 4]
            assert set(data["test"]["relation"]) == {rel} and set(data["test"]["source"]) == {source}


def test_load_by_name_from_parent_folder(biolama_fx, built, monkeypatch):
    out, _, _ = built
    monkeypatch.chdir(out.parent)
    assert load_dataset("biolama", "umls", split="test").num_rows == biolama_fx.counts("umls")


def test_declared_features_and_rows_equal_the_release(built, biolama_release_dir):
    out, _, _ = built
    data = load_dataset(str(out), "umls_UR44", split="test")
    assert data.features == features()
    assert data.features["obj_aliases"] == List(List(Value("string")))
    lines = (biolama_release_dir / "data/umls/triples_processed/UR44/test.jsonl").read_text().splitlines()
    for row, line in zip(data, lines, strict=True):
        record = json.loads(line)
        assert row["id"] == record["uuid"]
        assert row["relation"] == record["predicate_id"] == "UR44"
        for field in ("sub_uri", "sub_label", "sub_type", "sub_aliases", "obj_uris", "obj_labels", "obj_types",
                      "obj_aliases"):
            assert row[field] == record[field], field
        assert row["template"] == "[X] may prevent [Y] ."
        assert row["query"] == f"{record['sub_label']} may prevent [Y] ."
    warfarin = next(r for r in data if r["sub_label"] == "Warfarin")
    assert warfarin["answers"] == ["Thrombosis", "Embolism", "blood clot"]  # labels, then aliases
    ctd = load_dataset(str(out), "ctd_CD1", split="test")
    lamivudine = next(r for r in ctd if r["sub_label"] == "Lamivudine")
    assert lamivudine["obj_types"] == [] and lamivudine["sub_aliases"] == ["3TC"]
    assert lamivudine["answers"] == ["Hepatitis B", "hepatitis-B", "HBV infection"]


def test_card_statistics_configs_and_report(built, archive_sha):
    out, build, stats = built
    readme = (out / "README.md").read_text()
    meta = yaml.safe_load(readme.split("---")[1])
    configs = {c["config_name"]: c for c in meta["configs"]}
    ranking = {"all", "ctd", "umls", "wikidata", "ctd_CD1", "ctd_CG1", "umls_UR44", "umls_UR116", "wikidata_P2175",
               "wikidata_P780"}
    assert set(configs) == ranking | {f"{name}_mc" for name in ranking}  # and each as multiple choice
    assert [name for name, c in configs.items() if c.get("default")] == ["all"]
    # each file named after its content, and named by the card (never a glob)
    assert [(f["split"], re.sub(r"-[0-9a-f]{8}\.parquet$", ".parquet", f["path"]))
            for f in configs["umls_UR44"]["data_files"]] == [(s, f"data/umls/UR44/{s}.parquet")
                                                             for s in ("train", "dev", "test")]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert set(infos) == set(configs)  # every config states its schema and sizes
    assert [(s["name"], s["num_examples"]) for s in infos["umls_UR44"]["splits"]] == [("train", 3), ("dev", 2),
                                                                                       ("test", 4)]
    assert "umls" in meta["tags"] and meta["size_categories"] == ["n<1K"]
    block = statistics_block(readme)
    assert "| umls | `UR44` | 3 | 2 | 4 | 1.22 | 2.11 | 11 | `[X] may prevent [Y] .` |" in block
    assert "| **all** | **all (6)** | 18 | 12 | 24 |" in block
    # UR44 before UR116: relations in natural order
    assert block.index("`UR44`") < block.index("`UR116`")
    assert f"local archive, SHA-256 {archive_sha} checked against the expected hash (verified)" in readme
    assert "Sung, Mujeen" in readme and "CC0" in readme and "UMLS licence" in readme
    info = json.loads((out / "build_info.json").read_text())
    assert info["report"]["checksums_verified"] is True and info["report"]["archive_sha256"] == archive_sha
    assert info["report"]["prompts_without_data"] == {"wikidata": ["P9999"]}
    assert stats[-1]["test"] == 24 and build.report.split_overlaps == []


def test_folder_and_data_folder_sources_equal_the_archive(built, biolama_release_dir):
    _, from_archive, _ = built
    for source in (biolama_release_dir, biolama_release_dir / "data"):
        build = build_biolama(source, progress=False)
        assert build.rows == from_archive.rows
        assert not build.report.checksums_verified
        assert build.report.verification == "an extracted folder, which has no checksum to check"


def test_python_api_and_sources_subset(biolama_fx, biolama_release_dir):
    data = load_biolama(biolama_release_dir, "wikidata", progress=False)
    assert sorted(data) == ["dev", "test", "train"] and data["test"].num_rows == biolama_fx.counts("wikidata")
    build = build_biolama(biolama_release_dir, sources=["ctd", "wikidata"], progress=False)
    assert build.config_names() == ["all", "ctd", "wikidata", "ctd_CD1", "ctd_CG1", "wikidata_P780",
                                    "wikidata_P2175"]
    with pytest.raises(MedlamaInputError, match=r"unknown source\(s\) \['mesh'\]"):
        build_biolama(biolama_release_dir, sources=["mesh"], progress=False)


def test_download_verifies_caches_and_builds(biolama_fx, archive, archive_sha, cache, tmp_path):
    with _Server(archive.read_bytes()) as server:
        build, _ = write_biolama(tmp_path / "out", url=server.url, sha256=archive_sha, progress=False)
        fetched = server.requests
        assert fetched >= 1
        assert build.report.checksums_verified and build.report.archive_sha256 == archive_sha
        [cached] = downloads(cache)  # the download manager's copy, in the medlama cache; no partial file
        assert cached.read_bytes() == archive.read_bytes()
        # a second build reuses the verified copy without asking the server
        build_biolama(url=server.url, sha256=archive_sha, progress=False)
        assert server.requests == fetched
    assert load_dataset(str(tmp_path / "out"), "umls", split="test").num_rows == biolama_fx.counts("umls")
    assert downloads(cache) == [cached]


def test_download_from_file_url_and_env_hash(archive, archive_sha, cache, monkeypatch):
    monkeypatch.setenv("BIOLAMA_SHA256", archive_sha.upper())
    build = build_biolama(url=archive.as_uri(), progress=False)
    assert build.report.checksums_verified and build.report.origin == archive.as_uri()


@pytest.fixture
def unpinned(monkeypatch) -> None:
    """No pinned archive hash, whatever ``ARCHIVE_SHA256`` holds in this version (the tests say what follows)."""
    monkeypatch.setattr(release, "ARCHIVE_SHA256", None)


def test_download_refuses_without_a_hash(archive, cache, unpinned):
    with _Server(archive.read_bytes()) as server:
        with pytest.raises(MedlamaInputError, match=r"not pinned .* pass --sha256 HASH .* or --no-verify"):
            build_biolama(url=server.url, progress=False)
        assert server.requests == 0
        build = build_biolama(url=server.url, verify_checksums=False, progress=False)
        assert server.requests >= 1
    assert not build.report.checksums_verified
    assert build.report.verification.startswith("downloaded with --no-verify")


def test_pinned_hash_verifies_by_default_and_refuses_a_mismatch(archive, archive_sha, cache, monkeypatch, tmp_path):
    # pinned to this archive: no --sha256 needed, the download and a local copy are verified
    monkeypatch.setattr(release, "ARCHIVE_SHA256", archive_sha)
    with _Server(archive.read_bytes()) as server:
        build = build_biolama(url=server.url, progress=False)
    assert build.report.checksums_verified and build.report.archive_sha256 == archive_sha
    assert build_biolama(archive, progress=False).report.checksums_verified
    # pinned to another hash: the download and a local archive are refused, nothing is cached
    pinned = "0" * 64
    monkeypatch.setattr(release, "ARCHIVE_SHA256", pinned)
    shutil.rmtree(cache / "builder" / "downloads")
    with _Server(archive.read_bytes()) as server:
        with pytest.raises(MedlamaInputError, match=rf"checksum mismatch after download: SHA-256 {archive_sha}, "
                                                    rf"expected {pinned}"):
            build_biolama(url=server.url, progress=False)
    assert downloads(cache) == []  # the rejected file is not kept
    with pytest.raises(MedlamaInputError, match=rf"data\.tar\.gz: checksum mismatch: SHA-256 {archive_sha}, "
                                                rf"expected {pinned}; pass --no-verify"):
        build_biolama(archive, progress=False)
    # an explicit hash (or --no-verify) still overrides the pinned one
    assert build_biolama(archive, sha256=archive_sha, progress=False).report.checksums_verified
    assert not build_biolama(archive, verify_checksums=False, progress=False).report.checksums_verified


def test_download_with_wrong_hash_leaves_no_file(archive, cache):
    with _Server(archive.read_bytes()) as server:
        with pytest.raises(MedlamaInputError, match=r"checksum mismatch after download: SHA-256 [0-9a-f]{64}, "
                                                    r"expected 0{64}"):
            build_biolama(url=server.url, sha256="0" * 64, progress=False)
    assert downloads(cache) == []


def test_download_of_a_web_page_is_refused(cache):
    with _Server(b"<!DOCTYPE html><html><body>Google Drive can't scan this file</body></html>",
                 content_type="text/html") as server:
        with pytest.raises(MedlamaInputError, match=r"not a gzip archive \(a web page"):
            build_biolama(url=server.url, verify_checksums=False, progress=False)


def test_unreachable_url_says_how_to_work_offline(cache):
    import socket

    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(MedlamaInputError, match=r"download failed .* pass --source"):
        build_biolama(url=f"http://127.0.0.1:{port}/data.tar.gz", sha256="0" * 64, progress=False)


def test_source_from_environment(biolama_release_dir, cache, monkeypatch):
    monkeypatch.setenv("BIOLAMA_SOURCE", str(biolama_release_dir))
    assert build_biolama(progress=False).report.origin == str(biolama_release_dir)


def test_cli_build(biolama_fx, archive, archive_sha, tmp_path, capsys, unpinned):
    out = tmp_path / "biolama"
    assert main(["build", "biolama", "--out", str(out), "--source", str(archive), "--sha256", archive_sha]) == 0
    printed = capsys.readouterr().out
    assert "UR44" in printed and "checked against the expected hash" in printed
    assert main(["build", "biolama", "--out", str(out), "--source", str(archive), "--sources", "ctd", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["report"]
    assert report["sources"] == ["ctd"] and not report["checksums_verified"]
    assert "not checked: no trusted hash pinned or given" in report["verification"]
    assert load_dataset(str(out), split="test").num_rows == biolama_fx.counts("ctd")


def test_fixture_has_the_release_layout(biolama_fx, tmp_path):
    data = biolama_fx.write_release(tmp_path)
    for source in ("ctd", "umls", "wikidata"):
        assert (data / source / "prompts" / "manual.jsonl").is_file()
        assert (data / source / "meta").is_dir()
        assert (data / source / "entities").is_dir() == (source != "umls")
        for rel in biolama_fx.RELEASE[source]:
            assert sorted(p.name for p in (data / source / "triples_processed" / rel).iterdir()) == [
                "dev.jsonl", "test.jsonl", "train.jsonl"]
    line = json.loads((data / "umls" / "triples_processed" / "UR44" / "test.jsonl").read_text().splitlines()[0])
    assert set(line) == {"uuid", "predicate_id", "sub_uri", "sub_label", "sub_type", "sub_aliases", "obj_uris",
                         "obj_labels", "obj_types", "obj_aliases"}
    assert line["uuid"] == f"{line['sub_uri']}-UR44" and len(line["obj_aliases"]) == len(line["obj_labels"])
    archive = biolama_fx.write_archive(tmp_path / "data.tar.gz", data)
    with tarfile.open(archive) as tar:
        assert "data/umls/triples_processed/UR44/test.jsonl" in tar.getnames()
