"""``ContextVarianceBuilder`` from Python: ``download_and_prepare()`` + ``as_dataset()`` give the rows of the folder
``medlama build context-variance`` writes, config by config; misspelt settings and configs are named errors."""

from __future__ import annotations

import pytest

from medlama.datasets.context_variance import (
    BuildSettings,
    ContextVarianceBuilder,
    CorpusSpec,
    KnowledgeSpec,
)
from medlama.datasets.context_variance.layout import features, pool_features
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import settings_from


def _builder(name, medlama_folder, corpora, indexes, tmp_path, **more):
    notes, pmc = corpora
    return ContextVarianceBuilder(config_name=name, knowledge=KnowledgeSpec("medlama", medlama_folder, config="full"),
                                  corpora=(CorpusSpec.make(notes, "mimic"), CorpusSpec.make(pmc, "pmc")),
                                  index_root=indexes, cache_dir=str(tmp_path / "hf-cache"), progress=False, **more)


def _prepared(name, *args):
    builder = _builder(name, *args)
    builder.download_and_prepare()
    return builder.as_dataset(split="test")


def test_builder_configs_equal_the_built_folder(built, medlama_folder, corpora, tmp_path):
    from datasets import load_dataset

    sets, indexes = built
    for name in ("ehr_real", "ehr_knowledge-random_negative", "pmc_real_negative", "pools"):
        rows = _prepared(name, medlama_folder, corpora, indexes, tmp_path)
        assert rows.features == (pool_features() if name == "pools" else features())
        folder = load_dataset(str(sets), name, split="test")
        assert rows.num_rows == folder.num_rows > 0, name
        assert rows.to_list() == folder.to_list(), name
    # a whole source: the same rows; the folder reads them file by file, the builder as they are made
    rows = _prepared("ehr", medlama_folder, corpora, indexes, tmp_path)
    folder = load_dataset(str(sets), "ehr", split="test")
    assert sorted(rows.to_list(), key=lambda r: r["id"]) == sorted(folder.to_list(), key=lambda r: r["id"])
    # no config named: the folder's default
    assert _builder(None, medlama_folder, corpora, indexes, tmp_path).config.name == "ehr_real"


def test_prepared_config_is_reused_from_the_cache(built, medlama_folder, corpora, tmp_path):
    _, indexes = built
    first = _builder("pmc_real", medlama_folder, corpora, indexes, tmp_path)
    first.download_and_prepare()
    again = _builder("pmc_real", medlama_folder, corpora, indexes, tmp_path)
    assert again.cache_dir == first.cache_dir and again.info.splits["test"].num_examples == 3
    other = _builder("pmc_real", medlama_folder, corpora, indexes, tmp_path, settings=BuildSettings(seed=1))
    assert other.cache_dir != first.cache_dir  # other settings, other rows


def test_misspelt_settings_and_configs_are_named_errors(built, medlama_folder, corpora, tmp_path):
    _, indexes = built
    with pytest.raises(MedlamaInputError, match=r"unknown BuildSettings setting\(s\): 'max_doc' \(did you mean "
                                                r"'max_docs'\?\)"):
        settings_from(BuildSettings, {"max_doc": 3})
    with pytest.raises(MedlamaInputError, match=r"unknown context-variance builder setting 'setings' \(did you mean "
                                                r"'settings'\?\)"):
        _builder("ehr_real", medlama_folder, corpora, indexes, tmp_path, setings=BuildSettings())
    with pytest.raises(MedlamaInputError, match=r"unknown context-variance config 'ehr_rael'; .* \['ehr_real', "):
        _builder("ehr_rael", medlama_folder, corpora, indexes, tmp_path)
    no_negative = BuildSettings(negative=False)
    with pytest.raises(MedlamaInputError, match="unknown context-variance config 'ehr_real_negative'"):
        _builder("ehr_real_negative", medlama_folder, corpora, indexes, tmp_path, settings=no_negative)
    with pytest.raises(MedlamaInputError, match=r"setting 'random_mode' must be one of 'shuffle', 'insert', got "
                                                r"'shufle'"):
        BuildSettings(random_mode="shufle")
    with pytest.raises(MedlamaInputError, match=r"setting 'limit' must be at least 1, got 0"):
        KnowledgeSpec("medlama", medlama_folder, limit=0)
    with pytest.raises(MedlamaInputError, match="knowledge= .* or knowledge_base=, not neither"):
        ContextVarianceBuilder(corpora=(CorpusSpec.make("x.csv", "mimic"),), cache_dir=str(tmp_path / "c"))
