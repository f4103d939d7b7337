"""``benchmarks/gpu.py`` keeps working: every part runs at its smallest size on the CPU and reports queries/s,
tokens/s and MFU over the peak it was given; its FLOP count equals torch's own ``FlopCounterMode`` on a masked
LM's scoring pass and on a causal LM's cached step. Speed is never asserted (measured by the benchmark only)."""

from __future__ import annotations

import json

import pytest
import torch

from scripts import script  # tests/helpers


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture(scope="module")
def gpu():
    return script("gpu")  # benchmarks/gpu.py


def test_every_part_runs_small_on_the_cpu(gpu, medlama_source, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert gpu.main(["--device", "cpu", "--queries", "2", "--candidates", "12", "--peak-tflops", "0.5",
                     "--parts", "causal,masked,retrieval", "--source", str(medlama_source), "--repeats", "1",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "peak assumed (dense TFLOP/s): bf16 0.5, fp16 0.5, fp32 0.5" in printed
    record = json.loads(out.read_text())
    rows = {(row["part"], row["method"]): row for row in record["rows"]}
    assert set(rows) == {("causal", "causal-likelihood exhaustive"), ("causal", "causal-likelihood best-first"),
                         ("masked", "masked-likelihood within-word-l2r"), ("retrieval", "retrieval reference"),
                         ("retrieval", "retrieval sentence-transformers")}
    assert len(record["rows"]) == 7  # two causal models, both searches
    for row in record["rows"]:
        assert row["device"] == "cpu" and row["tokens"] > 0 and row["flops"] > 0 and row["seconds"] > 0
        assert row["MFU"] == pytest.approx(row["flops"] / row["seconds"] / 1e12 / 0.5)
        assert f"{100 * row['MFU']:.1f}%" in printed
    for row in record["rows"]:
        if row["part"] != "causal":
            continue
        # each causal row timed beside lm-eval's HFLM.loglikelihood and the lean full-sequence scorer, in this run
        assert [peer["name"] for peer in row["peers"]] == ["lm-eval HFLM.loglikelihood",
                                                           "lean full-sequence (plain torch)"]
        for peer in row["peers"]:
            assert peer["seconds"] > 0 and 0 <= peer["agreement"] <= 1
            assert f"peer {peer['name']}: {peer['seconds']:.2f} s; medlama/peer {row['seconds'] / peer['seconds']:.2f}x" \
                in printed
    retrieval = rows["retrieval", "retrieval reference"]
    assert retrieval["queries"] == 19 and 12 <= retrieval["candidates"] <= 12 + 19 * 30  # one query per relation
    # each retrieval row with its peer, timed beside it on the same inputs, and the table prints the ratio and
    # the agreement (lists differ only in the order of names that tie: test_plain_torch_peer_... below)
    for method, peer in (("retrieval reference", "plain torch"),
                         ("retrieval sentence-transformers", "sentence-transformers encode + util.semantic_search")):
        [measured] = rows["retrieval", method]["peers"]
        assert measured["name"] == peer and measured["seconds"] > 0 and 0.5 <= measured["agreement"] <= 1.0
        ratio = rows["retrieval", method]["seconds"] / measured["seconds"]
        assert f"peer {peer}: {measured['seconds']:.2f} s; medlama/peer {ratio:.2f}x; top-k agreement " \
               f"{100 * measured['agreement']:.1f}%" in printed


def test_plain_torch_peer_is_the_reference_computation(gpu, medlama_source):
    """The plain-torch peer, written apart from medlama, finds medlama's top 10 on the small hard set: per
    query the same scores (medlama's float64 scores of the names each picked), so the lists differ at most in
    the order of names that tie (names equal to this uncased model): what it is compared with is the same
    computation."""
    import numpy as np

    from medlama.core.defaults import default_model_path
    from medlama.probers.registry import make_prober

    queries = gpu.hard_set(medlama_source, 1, 40)
    prober = make_prober("retrieval", str(default_model_path()), device="cpu")
    ours = prober.rank_scored(queries, top_k=10, all_scores=True)
    search = gpu.plain_torch(default_model_path(), torch.device("cpu"), 128)
    theirs = search(queries.with_mask(prober.encoder.mask_token), queries.candidates, 10)
    for q, picked in enumerate(theirs):
        assert np.allclose(sorted(ours.pools[q].scores[picked]), sorted(ours.scores[q]), rtol=1e-5, atol=1e-5)
    assert gpu.agreement(ours.names, theirs, queries.candidates, 1) >= 0.9


def test_the_peer_parts_run_small_on_the_cpu_beside_their_peers(gpu, tmp_path, capsys):
    """masked-likelihood beside lm-pub-quiz, mask-predict beside a plain X-FACTR confidence decoding, rewire beside
    sentence-transformers' trainer: each row carries its peer, timed, with the ratio and (where both rank) a top-k
    agreement; on these tiny models both rankings are the same lists."""
    out = tmp_path / "gpu.json"
    assert gpu.main(["--device", "cpu", "--queries", "2", "--candidates", "12", "--peak-tflops", "0.5",
                     "--parts", "masked,mask-predict,rewire", "--repeats", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = {row["part"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"masked", "mask-pred", "rewire"}
    peers = {part: row["peers"] for part, row in rows.items()}
    assert [p["name"] for p in peers["masked"]] == ["lm-pub-quiz MaskedLMEvaluator"]
    assert peers["masked"][0]["agreement"] == 1.0 and peers["mask-pred"][0]["agreement"] == 1.0
    assert peers["mask-pred"][0]["name"].startswith("X-FACTR confidence decoding")
    assert peers["rewire"][0]["name"].startswith("sentence-transformers trainer")
    for part, row in rows.items():
        assert row["seconds"] > 0 and row["flops"] > 0 and peers[part][0]["seconds"] > 0
        assert f"medlama/peer {row['seconds'] / peers[part][0]['seconds']:.2f}x" in printed
    assert rows["rewire"]["queries"] == 3 * 16  # pairs of the steps after the first
    assert "arithmetic floor at the assumed peak" in printed


def test_unknown_part_and_missing_release_are_refused(gpu, tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu.main(["--parts", "causal,gpu"])
    assert "unknown --parts gpu" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu.main(["--parts", "retrieval", "--source", str(tmp_path)])
    assert "no MedLAMA release there" in capsys.readouterr().err


def test_flop_count_equals_torch_flop_counter(gpu, tmp_path):
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import DynamicCache

    from medlama.probers.registry import make_prober

    queries, corpus = gpu.synthetic_queries(2, 12)
    gpu.build_masked(tmp_path / "bert", "bert-tiny", corpus, torch.device("cpu"))
    lm = make_prober("masked-likelihood", tmp_path / "bert", device="cpu").lm
    lm.model.set_attn_implementation("eager")  # attention as matmuls, which FlopCounterMode counts on a CPU too
    counter = gpu.FlopCounter()
    counter.body(lm.model.base_model, lm.model.config, causal=False)
    counter.head(lm.head)
    ids = torch.randint(5, 100, (3, 9))
    with FlopCounterMode(display=False) as torch_count, torch.inference_mode():
        lm.logits_at(ids, torch.ones_like(ids), torch.tensor([[1], [4], [8]]))
    counter.close()
    assert counter.flops == torch_count.get_total_flops() and counter.tokens == 27

    gpu.build_causal(tmp_path / "llama", "llama-tiny", corpus, torch.device("cpu"), "fp32")
    model = make_prober("causal-likelihood", tmp_path / "llama", device="cpu").lm.model
    model.set_attn_implementation("eager")
    counter = gpu.FlopCounter()
    counter.body(model, model.config, causal=True, vocab_projection=model.get_output_embeddings().weight.numel())
    with torch.inference_mode():
        cache = model(input_ids=torch.randint(1, 50, (2, 6)), past_key_values=DynamicCache(config=model.config),
                      use_cache=True).past_key_values
        before = counter.flops
        with FlopCounterMode(display=False) as torch_count:  # one token after 6 cached: no causal half to count
            model(input_ids=torch.randint(1, 50, (2, 1)), past_key_values=cache, use_cache=True)
    counter.close()
    assert counter.flops - before == torch_count.get_total_flops()
