"""``masked-likelihood``: the PLL of each filled-in statement, checked against a direct computation (one masked
copy per scored token, run through the full model one at a time, log-probabilities summed in float64) on a
tiny BERT, for the four variants and both reductions: every score, the top-k and the gold's rank; and against
BEAR's library, lm-pub-quiz. Word boundaries of a slow WordPiece tokenizer give the same scores as the fast
tokenizer's ``word_ids``. End to end, ``medlama probe --method masked-likelihood`` records ``pll`` and
``reduction`` and logs scores and the gold's rank; a causal LM, an empty pool or a statement too long for
the model is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import make_prober
from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

# names of one and several words, split into WordPiece pieces or not, with punctuation inside
NAMES = ["aspirin", "salbutamol", "shortness of breath", "beta-blocker", "fever", "oseltamivir", "runny nose",
         "acetaminophen"]
TEXTS = ["salbutamol may treat [Y] .", "[Y] is a finding of influenza, often mild."]
GOLD = [["shortness of breath"], ["fever", "runny nose"]]


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert):
    return make_tiny_bert("pll-tiny-bert", mlm=True)


@pytest.fixture(scope="module")
def queries() -> QuerySet:
    return QuerySet(["q0", "q1"], ["r", "r"], TEXTS, GOLD, NAMES, "pll")


VARIANTS = ["within-word-l2r", "original", "sentence-l2r", "answer-l2r-word-l2r"]


def direct_pll(model, tokenizer, text: str, variant: str, answer: tuple[int, int] = (0, 0)) -> tuple[float, int]:
    """The PLL of ``text`` by its definition: for each token that is not special, a copy of the statement with
    that token masked (and, within-word-l2r, the ``##`` pieces that follow it in its word; sentence-l2r,
    every later position; answer-l2r-word-l2r, for a token inside the ``answer`` characters, the later tokens
    inside them, for any other the ``##`` pieces that follow), the full model run on that copy alone, the
    token's log-probability at its position; summed. Also the token count."""
    encoded = tokenizer(text, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    special = set(tokenizer.all_special_ids)
    # the answer's tokens: those whose characters overlap the answer's (WordPiece offsets hold no spaces)
    inside = [token not in special and start < answer[1] and end > answer[0]
              for token, (start, end) in zip(ids, offsets)]
    total, count = 0.0, 0
    for position, token in enumerate(ids):
        if token in special:
            continue
        copy = list(ids)
        copy[position] = tokenizer.mask_token_id
        if variant == "sentence-l2r":
            copy[position:] = [tokenizer.mask_token_id] * (len(ids) - position)
        elif variant == "answer-l2r-word-l2r" and inside[position]:
            copy = [tokenizer.mask_token_id if later >= position and inside[later] else t
                    for later, t in enumerate(copy)]
        after = position + 1
        by_word = variant == "within-word-l2r" or (variant == "answer-l2r-word-l2r" and not inside[position])
        while by_word and after < len(ids) and pieces[after].startswith("##"):
            copy[after] = tokenizer.mask_token_id
            after += 1
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([copy])).logits[0, position]
        total += float(logits.double().log_softmax(-1)[token])
        count += 1
    return total, count


@pytest.fixture(scope="module")
def expected(tiny_mlm):
    """Per variant, the direct (sum, count) of every statement: queries x candidates."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(tiny_mlm).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_mlm)
    return {variant: [[direct_pll(model, tokenizer, text.replace("[Y]", name), variant,
                                  (text.index("[Y]"), text.index("[Y]") + len(name))) for name in NAMES]
                      for text in TEXTS] for variant in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_scores_topk_and_gold_rank_equal_a_direct_pll(tiny_mlm, queries, expected, variant, reduction):
    # a batch of 7 copies cuts statements across batches and mixes candidates in one batch
    prober = make_prober("masked-likelihood", tiny_mlm, {"pll": variant, "reduction": reduction, "batch_size": 7},
                         device="cpu")
    direct = np.array([[s / n if reduction == "mean" else s for s, n in row] for row in expected[variant]])
    scores = prober.scores(queries)
    np.testing.assert_allclose(scores, direct, rtol=0, atol=2e-4)
    ranking = prober.rank_scored(queries, top_k=3)
    for q, row in enumerate(direct):
        order = sorted(range(len(NAMES)), key=lambda j: -row[j])  # stable: ties in candidate order
        assert ranking.names[q] == [NAMES[j] for j in order[:3]]
        np.testing.assert_allclose(ranking.scores[q], row[order[:3]], rtol=0, atol=2e-4)
        rank = min(order.index(NAMES.index(g)) for g in GOLD[q]) + 1
        assert ranking.gold_ranks[q] == rank
        assert ranking.gold_scores[q] == pytest.approx(row[order[rank - 1]], abs=2e-4)
    settings = prober.settings()
    assert (settings["method"], settings["pll"], settings["reduction"]) == ("masked-likelihood", variant, reduction)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_scores_equal_lm_pub_quiz(tiny_mlm, queries, variant, reduction):
    """BEAR's own library (lm-pub-quiz's MaskedLMEvaluator, its pll_metric of the same name: ``-`` for ``_``,
    ``answer_l2r+word_l2r`` for ``answer-l2r-word-l2r``) scores every statement as masked-likelihood does."""
    from lm_pub_quiz import Evaluator

    metric = "answer_l2r+word_l2r" if variant == "answer-l2r-word-l2r" else variant.replace("-", "_")
    evaluator = Evaluator.from_model(str(tiny_mlm), model_type="MLM", pll_metric=metric,
                                     device="cpu", capitalize=False)
    theirs = [evaluator.evaluate_instance(template=text, answers=NAMES, reduction=reduction, batch_size=5)
              for text in TEXTS]
    ours = make_prober("masked-likelihood", tiny_mlm, {"pll": variant, "reduction": reduction},
                       device="cpu").scores(queries)
    np.testing.assert_allclose(ours, np.array(theirs, dtype=np.float64), rtol=0, atol=1e-4)


def test_the_variants_differ_where_a_word_has_several_pieces(expected, tiny_mlm):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_mlm)
    l2r, original = (np.array([[s for s, _ in row] for row in expected[v]]) for v in ("within-word-l2r", "original"))
    for q, text in enumerate(TEXTS):
        for j, name in enumerate(NAMES):
            pieces = tokenizer.tokenize(text.replace("[Y]", name))
            split = any(piece.startswith("##") for piece in pieces)
            assert (abs(l2r[q, j] - original[q, j]) > 1e-6) == split, (text, name)
    assert any(tok.startswith("##") for tok in tokenizer.tokenize("salbutamol"))  # the l2r case is exercised
    # sentence-l2r and answer-l2r-word-l2r mask more than within-word-l2r: every statement's score moves (the
    # first query's template has words after the slot; every name of several words is its own answer)
    sentence, answer = (np.array([[s for s, _ in row] for row in expected[v]])
                        for v in ("sentence-l2r", "answer-l2r-word-l2r"))
    assert (np.abs(sentence - l2r) > 1e-6).all()
    several = [j for j, name in enumerate(NAMES) if len(tokenizer.tokenize(name)) > 1 and " " in name]
    assert several and (np.abs(answer[:, several] - l2r[:, several]) > 1e-6).all()


def test_a_slow_wordpiece_tokenizer_gives_the_same_words(tiny_mlm):
    from transformers import BertTokenizer

    prober = make_prober("masked-likelihood", tiny_mlm, {"batch_size": 16}, device="cpu")
    statements = [TEXTS[0].replace("[Y]", name) for name in NAMES]
    fast = prober.scorer.statements(statements)
    prober.lm.tokenizer = BertTokenizer.from_pretrained(tiny_mlm)
    slow = prober.scorer.statements(statements)
    assert torch.equal(fast.ids, slow.ids) and torch.equal(fast.words, slow.words)


def test_refuses_a_causal_lm_an_empty_pool_and_a_statement_too_long(tiny_mlm, tmp_path):
    from tiny_causal import save_causal  # tests/helpers: tiny causal LMs

    with pytest.raises(MedlamaInputError, match="causal-likelihood"):
        make_prober("masked-likelihood", save_causal(tmp_path / "gpt2", "gpt2"))
    prober = make_prober("masked-likelihood", tiny_mlm, device="cpu")
    with pytest.raises(MedlamaInputError, match="the candidate set of 'none' is empty"):
        prober.scores(QuerySet(["q"], ["r"], ["[Y] is here ."], [["fever"]], [], "none"))
    long = "word " * 200 + "[Y] ."
    with pytest.raises(MedlamaInputError, match="has 204 tokens; the model takes 128"):
        prober.scores(QuerySet(["q"], ["r"], [long], [["fever"]], ["fever"], "long"))
    with pytest.raises(MedlamaInputError, match="unknown pll 'left'"):
        make_prober("masked-likelihood", tiny_mlm, {"pll": "left"})


def test_probe_masked_likelihood_end_to_end(tiny_mlm, medlama_tiny, tmp_path):
    out = tmp_path / "pll"
    flags = ["--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_mlm), "--device", "cpu"]
    assert main(["probe", *flags, "--method", "masked-likelihood", "--pll", "original", "--reduction", "mean",
                 "--batch-size", "5", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    settings = result["settings"]
    assert (settings["method"], settings["pll"], settings["reduction"], settings["batch_size"]) == \
        ("masked-likelihood", "original", "mean", 5)
    assert settings["score"] == "mean of the statement's token log-probabilities, each token masked (original PLL)"
    rows = predictions(out, result["label"])
    assert len(rows) == 6
    for row in rows:
        assert len(row["scores"]) == len(row["predictions"]) == 10
        assert row["scores"] == sorted(row["scores"], reverse=True)
        assert isinstance(row["gold_rank"], int) and row["gold_score"] is not None
        if row["gold_rank"] <= 10:
            assert row["predictions"][row["gold_rank"] - 1] in row["gold"]
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal of a value outside the choices
        main(["probe", *flags, "--method", "masked-likelihood", "--pll", "left", "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    # a flag of masked-likelihood given to another method is refused
    assert main(["probe", *flags, "--method", "mask-average", "--pll", "original", "--out", str(tmp_path / "y")]) == 2


def test_a_tokenizer_without_word_boundaries_is_refused_for_within_word_l2r_only(tiny_mlm):
    prober = make_prober("masked-likelihood", tiny_mlm, device="cpu")
    fast = prober.lm.tokenizer

    class NoWords:
        """A tokenizer that gives token ids but no words (no word_ids, no WordPiece '##' pieces)."""

        def __call__(self, *args, **kwargs):
            return dict(fast(*args, **kwargs))

    prober.lm.tokenizer = NoWords()
    with pytest.raises(MedlamaInputError, match="gives no word boundaries .* use pll 'original'"):
        prober.scorer.statements([TEXTS[0].replace("[Y]", "aspirin")])
    prober.scorer.variant = "original"
    assert prober.scorer.statements([TEXTS[0].replace("[Y]", "aspirin")]).scored.sum() > 0


def test_a_model_in_memory_is_scored_in_its_own_precision_and_never_cast(tiny_mlm, medlama_tiny):
    """A caller's model in memory (a model being trained, say) is probed as it is: ``dtype`` must name its
    precision, and the probe leaves its weights' dtype as they were; the scores equal its folder's."""
    import medlama
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_mlm)
    model = AutoModelForMaskedLM.from_pretrained(tiny_mlm).eval()
    common = dict(data=medlama_tiny, config="full", method="masked-likelihood", limit=2)
    with pytest.raises(MedlamaInputError, match="the model in memory is fp32, not bf16"):
        medlama.probe(model, tokenizer=tokenizer, settings={"dtype": "bf16"}, **common)
    assert next(model.parameters()).dtype == torch.float32
    loaded = medlama.probe(model, tokenizer=tokenizer, **common)
    assert next(model.parameters()).dtype == torch.float32
    saved = medlama.probe(tiny_mlm, **common)
    assert loaded.predictions == saved.predictions and loaded.ranking.scores == saved.ranking.scores
    model.to(torch.bfloat16)
    with pytest.raises(MedlamaInputError, match="the model in memory is bf16, not fp32"):
        medlama.probe(model, tokenizer=tokenizer, **common)
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("variant", ["sentence-l2r", "answer-l2r-word-l2r"])
def test_the_lm_pub_quiz_variants_are_recorded_end_to_end(tiny_mlm, medlama_tiny, tmp_path, variant):
    out = tmp_path / variant
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_mlm), "--device",
                 "cpu", "--method", "masked-likelihood", "--pll", variant, "--limit", "2", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    assert result["settings"]["pll"] == variant
    assert result["settings"]["score"] == f"sum of the statement's token log-probabilities, each token masked " \
                                          f"({variant} PLL)"


def test_answer_l2r_word_l2r_is_refused_for_a_tokenizer_without_offsets(tiny_mlm):
    """Which tokens hold the answer is read off the characters each token covers, which only a fast tokenizer
    tells: one that does not is refused with the variant to use instead."""
    prober = make_prober("masked-likelihood", tiny_mlm, {"pll": "answer-l2r-word-l2r"}, device="cpu")
    fast = prober.lm.tokenizer

    class NoOffsets:
        """A tokenizer that gives token ids and WordPiece pieces but no character offsets (a slow one)."""

        wordpiece_tokenizer = True

        def __call__(self, *args, **kwargs):
            return dict(fast(*args, **kwargs))

        def convert_ids_to_tokens(self, ids):
            return fast.convert_ids_to_tokens(ids)

    prober.lm.tokenizer = NoOffsets()
    with pytest.raises(MedlamaInputError, match="not a fast tokenizer: .* use pll 'within-word-l2r'"):
        prober.scores(QuerySet(["q"], ["r"], [TEXTS[0]], [["fever"]], ["fever"], "slow"))
