"""Retrieval probing: equivalence with the reference implementation and with sentence-transformers' own
retrieval evaluation, layers, pooling, distances, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.runs.workflow import probe
from medlama.runs.queries import load_medlama_queries
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import settings_for
from medlama.probers.retrieval import PRESETS, RetrievalProber, RetrievalSettings
from medlama.core.settings import settings_from
from medlama.probers.faiss_search import search
from probe_outputs import predictions

HARD_FILES = ("associated_morphology_of_158_hard.csv", "gene_product_has_biochemical_function_491_hard.csv")


def reference_probe(model_path, test_files, prompts_csv, names_order):
    """A literal transcription of the reference implementation's probing loop (CPU, fp32).

    run_retrieval_prediction.py (its `batch_encode_plus`, removed in transformers 5, is the plain call): candidate names = every ``tail_names.split(" || ")`` and head name of
    the evaluated files; per file, queries from the human prompt with ``[Y]`` -> ``[MASK]``; names padded
    and cut to 25 tokens, queries to 50; ``hidden_states[-1][:, 0]``; exact L2 FAISS search for 10.
    The reference orders the candidates by ``list(set(...))``; ``names_order`` fixes one order so that
    exact distance ties resolve alike in both implementations.
    """
    import faiss
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).eval()
    prompts = pd.read_csv(prompts_csv)
    table = {row["pid"]: row["human_prompt"] for _, row in prompts.iterrows()}
    names = set()
    for path in test_files:
        for _, row in pd.read_csv(path).iterrows():
            names.update(row["tail_names"].split(" || "))
            names.add(row["head_name"])
    assert names == set(names_order)
    all_names = list(names_order)
    out = {}
    with torch.no_grad():
        reps = []
        for i in range(0, len(all_names), 128):
            toks = tokenizer(all_names[i:i + 128], padding="max_length", max_length=25,
                                               truncation=True, return_tensors="pt")
            reps.append(model(**toks, output_hidden_states=True).hidden_states[-1][:, 0, :].numpy())
        index = faiss.IndexFlatL2(reps[0].shape[1])
        index.add(np.concatenate(reps).astype("float32"))
        for path in test_files:
            frame = pd.read_csv(path)
            queries = [table[rel].replace("[X]", head).replace("[Y]", "[MASK]")
                       for rel, head in zip(frame["rel"], frame["head_name"])]
            for start in range(0, len(frame), 128):
                toks = tokenizer(queries[start:start + 128], padding="max_length", max_length=50, truncation=True,
                                 return_tensors="pt")
                rep = model(**toks, output_hidden_states=True).hidden_states[-1][:, 0, :].numpy()
                distances, nn = index.search(rep.astype("float32"), 11)
                for j in range(len(nn)):
                    row = frame.iloc[start + j]
                    answers = row["tail_names"].split(" || ")
                    top10 = [all_names[i] for i in nn[j][:10]]
                    first = next((jj for jj, pred in enumerate(top10) if pred in answers), None)
                    out[(row["rel"], start + j)] = {
                        "top10": top10, "distances": distances[j],
                        "hits": (int(top10[0] in answers), int(first is not None and first < 5), int(first is not None))}
    return out


@pytest.fixture(scope="module")
def two_relations(medlama_dir):
    return load_medlama_queries(medlama_dir, "hard", relations=["associated_morphology_of",
                                                                "gene_product_has_biochemical_function"])


def test_reference_preset_equals_reference_code_query_for_query(two_relations, medlama_source):
    queries = two_relations
    files = [medlama_source / "2021AA" / name for name in HARD_FILES]
    expected = reference_probe(str(default_model_path()), files, medlama_source / "prompts.csv", queries.candidates)
    result = probe(RetrievalProber(default_model_path(), PRESETS["reference"]), queries)
    assert len(result.predictions) == len(expected) == 158 + 491
    counters = {rel: 0 for rel in set(queries.relations)}
    for rel, ranked, gold in zip(queries.relations, result.predictions, queries.gold):
        reference = expected[(rel, counters[rel])]
        counters[rel] += 1
        ours = tuple(int(any(g in ranked[:k] for g in gold)) for k in (1, 5, 10))
        assert ours == reference["hits"]
        gaps = np.diff(reference["distances"])
        if np.all(gaps > 1e-4):  # no near-tie in the reference's top 11: the lists must agree exactly
            assert ranked[:10] == reference["top10"]
    hits = np.array([expected[key]["hits"] for key in sorted(expected)])
    assert result.acc(1) == pytest.approx(hits[:, 0].mean())
    assert result.acc(10) == pytest.approx(hits[:, 2].mean())
    per_file = [np.mean([expected[(rel, n)]["hits"][2] for n in range(count)]) for rel, count in counters.items()]
    assert result.acc(10, "macro") == pytest.approx(np.mean(per_file))


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert):
    """A 3-layer BERT with the bundled model's vocabulary, saved like a user's checkpoint."""
    return make_tiny_bert("tiny-bert", layers=3)


@pytest.fixture(scope="module")
def small_queries(two_relations):
    return two_relations.subset(range(0, len(two_relations), 7), name="small")


def test_layers_from_one_pass_equal_single_layer_runs(tiny_encoder, small_queries):
    both = RetrievalProber(tiny_encoder, RetrievalSettings(layers=(1, 3))).rank_layers(small_queries)
    assert both[1] == RetrievalProber(tiny_encoder, RetrievalSettings(layer=1)).rank(small_queries)
    assert both[3] == RetrievalProber(tiny_encoder, RetrievalSettings(layer=-1)).rank(small_queries)
    assert both[1] != both[3]


def test_mean_pooling_and_cosine_against_numpy(tiny_encoder, small_queries):
    from transformers import AutoModel, AutoTokenizer

    prober = RetrievalProber(tiny_encoder, RetrievalSettings(pooling="mean", distance="cosine", layer=2))
    predictions = prober.rank(small_queries, top_k=5)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    model = AutoModel.from_pretrained(str(tiny_encoder)).eval()

    def embed(texts, length):
        vectors = []
        with torch.no_grad():
            for text in texts:  # one at a time: no padding at all
                toks = tokenizer(text, truncation=True, max_length=length, return_tensors="pt")
                vectors.append(model(**toks, output_hidden_states=True).hidden_states[2][0].mean(0).numpy())
        vectors = np.stack(vectors)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    names = embed(small_queries.candidates, 25)
    texts = embed(small_queries.with_mask("[MASK]"), 50)
    similarity = texts @ names.T
    for row, predicted in zip(similarity, predictions):
        best = [small_queries.candidates[j] for j in np.argsort(-row, kind="stable")[:5]]
        assert predicted[0] == best[0]
        assert set(predicted) == set(best)


def test_search_l2_is_exact():
    rng = np.random.default_rng(0)
    names, queries = rng.normal(size=(50, 8)), rng.normal(size=(5, 8))
    expected = np.argsort(((queries[:, None, :] - names[None]) ** 2).sum(-1), axis=1)[:, :4]
    assert (search(names, queries, 4, "l2") == expected).all()


def test_bad_inputs(tiny_encoder, tmp_path, medlama_dir):
    with pytest.raises(MedlamaInputError, match=r"layer 4 out of range: .* has 3 layers"):
        RetrievalProber(tiny_encoder, RetrievalSettings(layer=4))
    with pytest.raises(MedlamaInputError, match="layer -5 out of range"):
        RetrievalProber(tiny_encoder, RetrievalSettings(layers=(-5,)))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(MedlamaInputError, match="not a model folder: no config.json"):
        RetrievalProber(tmp_path / "junk")
    from transformers import T5Config

    T5Config(vocab_size=100, d_model=8, d_ff=16, num_layers=1, num_heads=1, d_kv=8).save_pretrained(tmp_path / "t5")
    with pytest.raises(MedlamaInputError, match="'t5' is not an encoder-only model"):
        RetrievalProber(tmp_path / "t5")
    with pytest.raises(MedlamaInputError, match=r"unknown relation\(s\) 'may_cure'"):
        load_medlama_queries(medlama_dir, "hard", relations=["may_cure"])
    with pytest.raises(MedlamaInputError, match="unknown distance 'dot'"):
        RetrievalProber(tiny_encoder, RetrievalSettings(distance="dot"))
    with pytest.raises(MedlamaInputError, match="unknown retrieval preset 'fastest'"):
        settings_for("retrieval", preset="fastest")
    with pytest.raises(MedlamaInputError, match=r"has 0 \[Y\] slots"):
        QuerySet(["q"], ["r"], ["no slot"], [["a"]], ["a"])


def test_cli_writes_table_json_and_plots(medlama_dir, tiny_encoder, tmp_path, capsys):
    from medlama.cli import main

    out = tmp_path / "probe"
    status = main(["probe", "--data", str(medlama_dir), "--relations", "associated_morphology_of",
                   "--model", str(tiny_encoder), "--label", "tiny", "--layers", "1", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0
    assert "tiny L1" in printed and "tiny L3" in printed and "associated_morphology_of" in printed
    results = json.loads((out / "results.json").read_text())
    assert [r["label"] for r in results] == ["tiny L1", "tiny L3"]
    rows = predictions(out, "tiny L1")
    assert len(rows) == 158 and len(rows[0]["predictions"]) == 10 and len(predictions(out)) == 2 * 158
    assert "queries" not in results[0]
    assert 0 <= results[0]["metrics"]["acc@10"] <= 1
    assert [r["settings"]["layer"] for r in results] == [1, 3]
    for result in results:  # each layer's run carries the same provenance as any probe's
        assert result["provenance"]["data"]["release_commit"] and result["provenance"]["device"]["device"] == "cpu"
    for plot in ("relations.png", "answer_length.png", "layers.png"):
        assert (out / plot).read_bytes()[:4] == b"\x89PNG"


def information_retrieval_evaluator():
    """sentence-transformers' ``InformationRetrievalEvaluator``, from where its version keeps it."""
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    except ImportError:  # pragma: no cover - older sentence-transformers
        from sentence_transformers.evaluation import InformationRetrievalEvaluator
    return InformationRetrievalEvaluator


def assert_preset_equals_the_evaluator(queries):
    """The ``sentence-transformers`` preset's result on ``queries``, once its acc@1/5/10 are found to equal
    sentence-transformers' own evaluator's accuracy@k with the prompts as queries, the candidate set as
    corpus and the gold answers as relevant documents, relation by relation.

    The evaluator encodes the corpus once (its own ``embed_inputs``) and is given those embeddings for each
    relation's evaluation; each query is encoded once, by its relation's evaluator."""
    from sentence_transformers import SentenceTransformer

    result = probe(RetrievalProber(default_model_path(), PRESETS["sentence-transformers"], device="cpu"), queries)
    model = SentenceTransformer(str(default_model_path()), device="cpu")
    assert result.settings["pooling"] == "sentence-transformers" and result.settings["distance"] == "cosine"
    assert result.settings["query_max_length"] == result.settings["name_max_length"] == model.max_seq_length == 256
    # corpus ids sort as the candidates do, so that exact ties (names equal but for case, to this uncased
    # model) are broken alike: the evaluator by ascending id, the exact search by candidate order
    corpus = {f"{index:06d}": name for index, name in enumerate(queries.candidates)}
    ids = {name: key for key, name in corpus.items()}
    assert all(answer in ids for gold in queries.gold for answer in gold)  # the evaluator drops queries without
    texts = queries.with_mask(model.tokenizer.mask_token)
    evaluator_type, corpus_embeddings = information_retrieval_evaluator(), None
    ks = (1, 5, 10)
    hits = {k: result.hits(k) for k in ks}
    for relation in sorted(set(queries.relations)):
        rows = [i for i, r in enumerate(queries.relations) if r == relation]
        evaluator = evaluator_type(
            {queries.ids[i]: texts[i] for i in rows}, corpus,
            {queries.ids[i]: {ids[answer] for answer in queries.gold[i]} for i in rows},
            accuracy_at_k=list(ks), precision_recall_at_k=[1], mrr_at_k=[10], ndcg_at_k=[10], map_at_k=[10],
            score_functions={model.similarity_fn_name: model.similarity}, write_csv=False, name=relation)
        if corpus_embeddings is None:
            corpus_embeddings = evaluator.embed_inputs(model, evaluator.corpus, encode_fn_name="document")
        scores = evaluator.compute_metrices(model, corpus_embeddings=corpus_embeddings)[model.similarity_fn_name]
        for k in ks:
            theirs = round(scores["accuracy@k"][k] * len(rows))
            ours = sum(hits[k][i] for i in rows)
            assert ours == theirs, (relation, k, ours, theirs)
            assert result.per_relation()[relation][f"acc@{k}"] == pytest.approx(scores["accuracy@k"][k], rel=1e-12)
    return result


#: Three hard relations (the one with the most hits, two of the smallest): the union of their pools, 3,132 names,
#: is what ``--relations`` probes them against (the ``evaluated`` rule); it holds two pairs of names equal but for
#: case ("Herpes Zoster" and "Herpes zoster", "Myocardial Infarction" and "Myocardial infarction"), exact ties to
#: this uncased model.
EVALUATOR_RELATIONS = ("gene_product_encoded_by_gene", "occurs_after", "may_prevent")


@pytest.mark.slow
def test_sentence_transformers_preset_equals_the_information_retrieval_evaluator(medlama_dir):
    """Three hard relations, their first 40 queries each (120), ranked against the union of their pools (3,132
    names), as ``--relations ... --limit 40`` probes: each side encodes the names once. (Every relation and all
    15,329 queries against the whole pool take the same path; only the test's time is cut: the encoder's time
    goes on the names.)"""
    whole = load_medlama_queries(medlama_dir, "hard", relations=EVALUATOR_RELATIONS)
    queries = whole.limit_per_relation(40)
    assert sorted(set(queries.relations)) == sorted(EVALUATOR_RELATIONS) and len(queries) == 3 * 40
    assert queries.candidates == whole.candidates and len(queries.candidates) == 3_132
    assert len({name.lower() for name in queries.candidates}) == 3_132 - 2  # the two ties
    assert_preset_equals_the_evaluator(queries)


@pytest.fixture(scope="module")
def tiny_sentence_transformer(tiny_encoder, tmp_path_factory):
    """The tiny encoder as a sentence-transformers model: mean pooling, normalised, max_seq_length 20."""
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # pragma: no cover - older sentence-transformers
        from sentence_transformers.models import Normalize, Pooling, Transformer

    word = Transformer(str(tiny_encoder), max_seq_length=20)
    model = SentenceTransformer(modules=[word, Pooling(32, "mean"), Normalize()], device="cpu")
    folder = tmp_path_factory.mktemp("tiny-st")
    model.save(str(folder))
    return folder


def test_sentence_transformers_pooling_is_sentence_transformers_encode(tiny_sentence_transformer, small_queries):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_sentence_transformer), device="cpu")
    settings = PRESETS["sentence-transformers"]
    prober = RetrievalProber(tiny_sentence_transformer, settings)
    assert prober.settings()["query_max_length"] == prober.settings()["name_max_length"] == 20
    names = model.encode(small_queries.candidates, convert_to_numpy=True)
    texts = model.encode(small_queries.with_mask("[MASK]"), convert_to_numpy=True)
    expected = [[small_queries.candidates[j] for j in row] for row in search(names, texts, 10, "cosine")]
    assert prober.rank(small_queries) == expected
    # a loaded SentenceTransformer is probed as its folder is; lengths given replace max_seq_length for the
    # call only, and a model in training stays in training
    model.max_seq_length = 3
    short = model.encode(small_queries.candidates, convert_to_numpy=True)
    model.max_seq_length = 20
    model.train()
    cut = RetrievalProber(model, settings_from(RetrievalSettings, base=settings, name_max_length=3))
    assert cut.settings()["name_max_length"] == 3 and cut.settings()["query_max_length"] == 20
    expected = [[small_queries.candidates[j] for j in row] for row in search(short, texts, 10, "cosine")]
    assert cut.rank(small_queries) == expected != prober.rank(small_queries)
    assert model.training and model.max_seq_length == 20
    assert RetrievalProber(model, settings).rank(small_queries) == prober.rank(small_queries)


def test_sentence_transformers_pooling_refuses_what_does_not_apply(tiny_encoder):
    from transformers import AutoModel

    with pytest.raises(MedlamaInputError, match="layer and layers do not apply"):
        settings_for("retrieval", {"layer": 2}, preset="sentence-transformers")
    with pytest.raises(MedlamaInputError, match="layer and layers do not apply"):
        RetrievalSettings(pooling="sentence-transformers", layers=(1, 2))
    with pytest.raises(MedlamaInputError, match="encodes with a SentenceTransformer.*not a BertModel"):
        RetrievalProber(AutoModel.from_pretrained(str(tiny_encoder)), PRESETS["sentence-transformers"])
    with pytest.raises(MedlamaInputError, match="model path does not exist"):
        RetrievalProber(tiny_encoder / "missing", PRESETS["sentence-transformers"])


def test_cli_sentence_transformers_preset_records_what_it_did(medlama_dir, tiny_sentence_transformer, tmp_path,
                                                              capsys):
    from medlama.cli import main

    common = ["probe", "--data", str(medlama_dir), "--relations", "associated_morphology_of", "--limit", "20",
              "--model", str(tiny_sentence_transformer), "--preset", "sentence-transformers"]
    assert main([*common, "--out", str(tmp_path / "st")]) == 0
    settings = json.loads((tmp_path / "st" / "results.json").read_text())[0]["settings"]
    assert (settings["pooling"], settings["distance"], settings["query_max_length"], settings["name_max_length"]) \
        == ("sentence-transformers", "cosine", 20, 20)  # the model's own max_seq_length, as a number
    capsys.readouterr()
    assert main([*common, "--layer", "2", "--out", str(tmp_path / "refused")]) == 2
    assert "layer and layers do not apply" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
