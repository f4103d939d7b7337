"""The baseline probers: mask average, mask predict (X-FACTR) and generative (BART / T5), and their errors.

Tiny models are built from configs and saved like a user's checkpoint, then loaded through the probers.
Decoding is checked by hand on models whose forward pass returns designed probabilities: the expected
scores below are written as logs of those probabilities.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from medlama.core.errors import MedlamaInputError
from medlama.runs.workflow import probe
from medlama.probers.query_set import QuerySet
from fp32 import fp32_sum_atol
from probe_outputs import predictions
from tiny_t5 import save_t5

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "aspirin", "may", "treat", "pain", "fever", "head", "##ache",
         "headache", "back", "chronic", "cold", ".", "the", "relieve", "##s"]
VOCAB = {word: index for index, word in enumerate(WORDS)}
V = len(WORDS)
ln = math.log


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def bert_config(vocab_size: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)


def small_bert_tokenizer():
    from transformers import BertTokenizer

    return BertTokenizer(vocab=dict(VOCAB))


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    """A 2-layer BertForMaskedLM over WORDS, its output bias spread so that predictions are well apart."""
    from transformers import BertForMaskedLM

    folder = tmp_path_factory.mktemp("tiny-mlm")
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(V))
    with torch.no_grad():
        model.cls.predictions.bias.copy_(torch.randn(V) * 4)
    model.save_pretrained(folder)
    small_bert_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_distilbert_mlm(tmp_path_factory):
    """A masked LM whose head is several modules (DistilBERT): scored through full forward passes."""
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    folder = tmp_path_factory.mktemp("tiny-distilbert")
    torch.manual_seed(1)
    DistilBertForMaskedLM(DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                           max_position_embeddings=64)).save_pretrained(folder)
    small_bert_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """The same architecture saved without the MLM head, as `medlama rewire` saves encoders."""
    from transformers import BertModel

    folder = tmp_path_factory.mktemp("tiny-encoder")
    BertModel(bert_config(V)).save_pretrained(folder)
    small_bert_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory):
    return save_t5(tmp_path_factory.mktemp("tiny-t5"))


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    """A 1-layer BART with a byte-level BPE tokenizer over a few words."""
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer

    vocab = {token: i for i, token in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    merges: list[tuple[str, str]] = []
    for char in "abcdefghijklmnopqrstuvwxyz.Ġ":
        vocab.setdefault(char, len(vocab))
    for word in ["aspirin", "may", "treat", "pain", "fever", "back", "the", "cold", "relieve"]:
        for spelled in (word, "Ġ" + word):
            piece = spelled[0]
            for char in spelled[1:]:
                if (piece, char) not in merges:
                    merges.append((piece, char))
                piece += char
                vocab.setdefault(piece, len(vocab))
    vocab.setdefault("Ġ.", len(vocab))
    merges.append(("Ġ", "."))
    vocab["<mask>"] = len(vocab)
    tokenizer = BartTokenizer(vocab=vocab, merges=merges)
    config = BartConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                        max_position_embeddings=64)
    folder = tmp_path_factory.mktemp("tiny-bart")
    torch.manual_seed(0)
    BartForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def queries(texts, candidates=(), name="q"):
    return QuerySet([f"q{i}" for i in range(len(texts))], ["rel"] * len(texts), list(texts),
                    [["pain"]] * len(texts), list(candidates), name)


# -- designed models: a forward pass that returns chosen probabilities at the masks --------------------------


def distribution(probs: dict[str, float]) -> torch.Tensor:
    """Log-probabilities over WORDS: the named tokens get theirs, the others share the rest equally."""
    rest = (1.0 - sum(probs.values())) / (V - len(probs))
    p = torch.full((V,), rest, dtype=torch.float64)
    for token, value in probs.items():
        p[VOCAB[token]] = value
    return p.log().float()


def design(prober, monkeypatch, rule):
    """Make ``prober``'s model return ``rule(span, k)`` at every mask of the answer span.

    The span is what stands between the verb (``treat``/``relieve``) and the final ``.``, as token strings
    (``[MASK]`` where masked). Returns the list of batch sizes the model was called with.
    """
    calls: list[int] = []

    def forward(input_ids=None, attention_mask=None, **_):
        calls.append(int(input_ids.shape[0]))
        logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], V)
        for r, row in enumerate(input_ids.tolist()):
            tokens = [WORDS[i] for i in row]
            start = next(i for i, t in enumerate(tokens) if t in ("treat", "relieve")) + 1
            end = tokens.index(".", start)
            span = tokens[start:end]
            for k, token in enumerate(span):
                if token == "[MASK]":
                    logits[r, start + k] = distribution(rule(span, k))
        return SimpleNamespace(logits=logits)

    prober.lm.head = None  # the full forward pass, which is patched
    monkeypatch.setattr(prober.lm.model, "forward", forward)
    return calls


# -- mask average ---------------------------------------------------------------------------------------------

AVERAGE_TABLE = {(1, 0): {"pain": .5, "fever": .2, "headache": .1}, (2, 0): {"back": .6, "chronic": .3},
                 (2, 1): {"pain": .7}, (3, 0): {"chronic": .4}, (3, 1): {"back": .5}, (3, 2): {"pain": .8}}
CANDIDATES = ["pain", "fever", "headache", "zzz", "back pain", "chronic pain", "chronic back pain", ""]


def test_mask_average_scores_by_hand(tiny_mlm, monkeypatch):
    from medlama.probers.mask_average import MaskAverageProber

    prober = MaskAverageProber(tiny_mlm)
    calls = design(prober, monkeypatch, lambda span, k: AVERAGE_TABLE.get((len(span), k), {}))
    qs = queries(["aspirin may treat [Y] .", "the cold may relieve [Y] ."], CANDIDATES)
    scores = prober.scores(qs)
    unk = (1 - .8) / (V - 3)  # [UNK] at a one-mask position: a share of the rest
    expected = [ln(.5), ln(.2), ln(.1), ln(unk), (ln(.6) + ln(.7)) / 2, (ln(.3) + ln(.7)) / 2,
                (ln(.4) + ln(.5) + ln(.8)) / 3, -math.inf]
    for row in scores.tolist():
        assert row == pytest.approx(expected, rel=1e-5)
    # one forward pass per (query, candidate length): lengths 1, 2, 3, both queries in each pass
    assert calls == [2, 2, 2]
    ranked = prober.rank(qs, top_k=3)
    assert ranked == [["back pain", "chronic back pain", "pain"]] * 2
    everything = prober.rank_scored(qs, top_k=100)
    assert everything.names[0] == ["back pain", "chronic back pain", "pain", "chronic pain", "fever",
                                   "headache", "zzz"]  # the empty name is never ranked
    assert everything.scores[0][0] == pytest.approx((ln(.6) + ln(.7)) / 2, rel=1e-5)


def test_mask_average_cap_scores_long_names_on_their_first_tokens(tiny_mlm, monkeypatch):
    from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings

    prober = MaskAverageProber(tiny_mlm, MaskAverageSettings(max_tokens=2, batch_size=1))
    calls = design(prober, monkeypatch, lambda span, k: AVERAGE_TABLE.get((len(span), k), {}))
    qs = queries(["aspirin may treat [Y] .", "the cold may relieve [Y] ."], CANDIDATES)
    scores = prober.scores(qs)[0].tolist()
    # "chronic back pain" at two masks: "chronic" as the first of two, "back" from the rest of (2, 1)
    assert scores[6] == pytest.approx((ln(.3) + ln((1 - .7) / (V - 1))) / 2, rel=1e-5)
    assert calls == [1, 1, 1, 1]  # batch size 1: per query, lengths 1 and 2
    assert prober.rank(qs, top_k=10)[0][-2:] == ["chronic back pain", "zzz"]


@pytest.mark.parametrize("model, head_only", [("tiny_mlm", True), ("tiny_distilbert_mlm", False)])
def test_mask_average_equals_a_plain_per_candidate_computation(model, head_only, request):
    """Real models: batched, padded (head-only) scoring equals scoring each candidate on its own."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings

    folder = request.getfixturevalue(model)
    texts = ["aspirin may treat [Y] .", "the chronic cold may relieve the [Y] .", "[Y] may treat pain ."]
    names = ["pain", "back pain", "headache", "head", "chronic back pain", "fever"]
    qs = queries(texts, names)
    prober = MaskAverageProber(folder, MaskAverageSettings(batch_size=2))
    assert (prober.lm.head is not None) == head_only  # BERT's `cls` runs on the mask positions only
    scores = prober.scores(qs).numpy()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    plain, terms = np.empty(scores.shape), 1
    with torch.no_grad():
        for q, text in enumerate(texts):
            for c, name in enumerate(names):
                ids = tokenizer(name, add_special_tokens=False)["input_ids"]
                terms = max(terms, len(ids))
                masked = text.replace("[Y]", " ".join(["[MASK]"] * len(ids)))
                encoded = tokenizer(masked, return_tensors="pt")
                lp = model(input_ids=encoded["input_ids"]).logits[0].log_softmax(-1)
                where = (encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
                plain[q, c] = torch.stack([lp[p, t] for p, t in zip(where, ids)]).mean().item()
    # float32 means of up to `terms` log-probabilities, batched and padded or not: equal up to rounding
    np.testing.assert_allclose(scores, plain, rtol=0, atol=fp32_sum_atol(scores, plain, terms=terms))


# -- mask predict ---------------------------------------------------------------------------------------------


def xfactr_rule(span, k):
    """m = 1: fever or headache. m = 2: each position's prediction depends on the other position."""
    if len(span) == 1:
        return {"fever": .3, "headache": .2}
    if len(span) != 2:
        return {}
    other = span[1 - k]
    if k == 0:
        given = {"[MASK]": {"head": .5, "back": .4}, "##ache": {"head": .9}, "pain": {"back": .7, "head": .1}}
    else:
        given = {"[MASK]": {"pain": .6, "##ache": .3}, "head": {"##ache": .5, "pain": .1}, "back": {"pain": .99}}
    return given.get(other, {})


def designed_predict(tiny_mlm, monkeypatch, **settings):
    from medlama.probers.mask_predict import MaskPredictProber
    from medlama.probers.registry import settings_for

    base = {"max_masks": 2, "beam_size": 1, "to_candidates": False}
    prober = MaskPredictProber(tiny_mlm, settings_for("mask-predict", {**base, **settings}))
    return prober, design(prober, monkeypatch, xfactr_rule)


def decoded(prober, texts=("aspirin may treat [Y] .",), candidates=()):
    return prober.decode(queries(list(texts), candidates))


FEVER = ("fever", ln(.3))


@pytest.mark.parametrize("settings, expected, calls", [
    # independent: every mask its own best token, one forward pass for both mask counts
    ({"init": "independent"}, [("head pain", (ln(.5) + ln(.6)) / 2), FEVER], [2]),
    # order: "head" first, then the second mask given "head"
    ({"init": "order"}, [("headache", (ln(.5) + ln(.5)) / 2), FEVER], [2, 1]),
    # confidence: "pain" (0.6) beats "head" (0.5) and is filled first; then "back" given "pain"
    ({"init": "confidence"}, [("back pain", (ln(.7) + ln(.6)) / 2), FEVER], [2, 1]),
    # beam 2 escapes the greedy order fill; "headache" of one mask (0.2) merges into the better two-mask one
    ({"init": "order", "beam_size": 2}, [("back pain", (ln(.4) + ln(.99)) / 2),
                                         ("headache", (ln(.5) + ln(.5)) / 2), FEVER], [2, 2]),
    # independent + order refinement: "head" re-predicted given "pain" becomes "back" (0.7); "pain" given
    # "back" stays "pain" and keeps its fill-time log-probability 0.6; a second pass changes nothing
    ({"init": "independent", "refine": "order"}, [("back pain", (ln(.7) + ln(.6)) / 2), FEVER], [2, 2, 1, 1, 1]),
    ({"init": "independent", "refine": "order", "max_iterations": 1},
     [("head pain", (ln(.5) + ln(.6)) / 2), FEVER], [2]),
    # independent + confidence: the least confident "head" (0.5) is re-masked, then "pain" (0.6 < 0.7)
    ({"init": "independent", "refine": "confidence"}, [("back pain", (ln(.7) + ln(.6)) / 2), FEVER], [2, 2, 1]),
    # order + order: nothing changes; the re-predicted "head" (now 0.9) keeps its fill-time 0.5
    ({"init": "order", "refine": "order"}, [("headache", (ln(.5) + ln(.5)) / 2), FEVER], [2, 2, 1, 1]),
    # rescoring: each token with only itself masked
    ({"init": "order", "refine": "order", "rescore": True}, [("headache", (ln(.9) + ln(.5)) / 2), FEVER], None),
    ({"init": "independent", "refine": "order", "rescore": True}, [("back pain", (ln(.7) + ln(.99)) / 2), FEVER], None),
])
def test_mask_predict_decoding_by_hand(tiny_mlm, monkeypatch, settings, expected, calls):
    prober, seen = designed_predict(tiny_mlm, monkeypatch, **settings)
    got = decoded(prober)[0]
    assert [text for text, _ in got] == [text for text, _ in expected]
    assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-5)
    if calls is not None:
        assert seen == calls  # every round is one forward pass shared by all mask counts and beams


def test_mask_predict_beam_merge_and_candidate_names(tiny_mlm, monkeypatch):
    prober, calls = designed_predict(tiny_mlm, monkeypatch, beam_size=2, to_candidates=True)
    texts = ["aspirin may treat [Y] .", "the cold may relieve [Y] ."]
    got = decoded(prober, texts, ["Back pain", "back pain", "Fever", "aspirin"])
    # m = 2: the two best combinations (0.5 x 0.6 and 0.4 x 0.6); m = 1: fever, headache. "back pain" has
    # the ids of two candidate names (uncased tokenizer): both are reported, in candidate order
    assert got[0] == got[1]
    assert [text for text, _ in got[0]] == ["head pain", "Back pain", "back pain", "Fever", "headache"]
    assert [s for _, s in got[0]] == pytest.approx([(ln(.5) + ln(.6)) / 2, (ln(.4) + ln(.6)) / 2,
                                                    (ln(.4) + ln(.6)) / 2, ln(.3), ln(.2)], rel=1e-5)
    assert calls == [4]  # two queries x two mask counts in one pass
    assert prober.rank(queries(texts, ["Back pain", "back pain"]), top_k=2) == [["head pain", "Back pain"]] * 2


def test_mask_predict_presets_and_settings():
    from medlama.probers.mask_predict import PRESETS, MaskPredictSettings
    from medlama.probers.registry import settings_for

    def settings_from(preset=None, **values):
        return settings_for("mask-predict", values, preset=preset)

    paper = settings_from("paper")
    assert (paper.beam_size, paper.max_masks, paper.init, paper.refine, paper.max_iterations) == \
        (5, 5, "independent", "none", 10)
    second = settings_from("paper-order+order")
    assert (second.beam_size, second.max_masks, second.name) == (5, 5, "order+order")
    assert settings_from("paper", init="confidence", beam_size=None).init == "confidence"
    assert set(PRESETS) == {"paper", "paper-order+order", "biolama", "fill-mask"}
    biolama = settings_from("biolama")  # BioLAMA's run_optiprompt.py / run_manual.py decoding
    assert (biolama.beam_size, biolama.max_masks, biolama.init, biolama.refine, biolama.max_iterations) == \
        (5, 10, "confidence", "none", 10)
    with pytest.raises(MedlamaInputError, match="unknown initial fill 'left'"):
        MaskPredictSettings(init="left")
    with pytest.raises(MedlamaInputError, match="unknown refinement 'all'"):
        MaskPredictSettings(refine="all")
    with pytest.raises(MedlamaInputError, match=r"max iterations \(3\) must be >= max masks \(5\)"):
        settings_from("paper-order+order", max_iterations=3)
    with pytest.raises(MedlamaInputError, match="beam size must be >= 1"):
        settings_from(beam_size=0)
    with pytest.raises(MedlamaInputError, match="unknown mask-predict preset 'fast'"):
        settings_from("fast")


@pytest.mark.parametrize("init, refine", [("independent", "none"), ("order", "order"), ("confidence", "confidence")])
def test_mask_predict_real_model_batching_does_not_change_answers(tiny_mlm, init, refine):
    from medlama.probers.mask_predict import MaskPredictProber
    from medlama.probers.registry import settings_for

    def settings_from(**values):
        return settings_for("mask-predict", values)

    texts = ["aspirin may treat [Y] .", "the chronic cold may relieve the [Y] .", "[Y] may treat pain ."]
    qs = queries(texts, ["pain", "back pain"])
    one = MaskPredictProber(tiny_mlm, settings_from(init=init, refine=refine, max_masks=3, beam_size=3,
                                                    batch_size=1)).decode(qs)
    many = MaskPredictProber(tiny_mlm, settings_from(init=init, refine=refine, max_masks=3, beam_size=3,
                                                     batch_size=3)).decode(qs)
    for a, b in zip(one, many):
        assert [t for t, _ in a] == [t for t, _ in b]
        # float32 means of up to 3 log-probabilities (max_masks), batched otherwise: equal up to rounding
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=fp32_sum_atol([s for _, s in b], terms=3))
        assert len(a) == len({t for t, _ in a}) and 3 <= len(a) <= 9  # up to beam x masks distinct answers
        assert all(s1 >= s2 for (_, s1), (_, s2) in zip(a, a[1:]))
    ranked = MaskPredictProber(tiny_mlm, settings_from(init=init, refine=refine, max_masks=3,
                                                       beam_size=3)).rank(qs, top_k=2)
    assert [len(r) for r in ranked] == [2, 2, 2]


# -- generative -----------------------------------------------------------------------------------------------


def test_t5_answer_parsing():
    from medlama.probers.generative import t5_answer

    assert t5_answer("<extra_id_0> Dengue virus<extra_id_1> of the<extra_id_2>") == "Dengue virus"
    assert t5_answer(" <extra_id_0>  two   words ") == "two words"
    assert t5_answer("Dengue<extra_id_1> rest") == "Dengue"  # the opening sentinel left out
    assert t5_answer("<extra_id_0><extra_id_1> x") == ""
    assert t5_answer("<extra_id_0> no closing sentinel") == "no closing sentinel"


def test_bart_answer_alignment():
    from medlama.probers.generative import aligned_answer

    prefix, suffix = "moexipril might treat ", " ."
    assert aligned_answer("moexipril might treat hypertension .", prefix, suffix) == "hypertension"
    assert aligned_answer("moexipril might treat essential hypertension.", prefix, suffix) == "essential hypertension"
    assert aligned_answer("moexipril  might treat\nheart failure .", prefix, suffix) == "heart failure"
    assert aligned_answer("moexipril might treat .", prefix, suffix) == ""
    # the model changed the text around the slot: partial matches stop at whole words
    assert aligned_answer("moexipril may treat hypertension .", prefix, suffix) == "may treat hypertension"
    assert aligned_answer("moexipril might treatment of pain .", prefix, suffix) == "treatment of pain"
    assert aligned_answer("moexipril might treat pain and more", prefix, suffix) == "pain and more"
    assert aligned_answer("Aspirin may treat pain .", "", " may treat pain .") == "Aspirin"


def test_generative_t5_parses_designed_beams(tiny_t5, monkeypatch):
    from medlama.probers.generative import GenerativeProber

    prober = GenerativeProber(tiny_t5)
    assert prober.style == "t5"
    tok = prober.tokenizer
    sentinel0, sentinel1 = tok.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"])
    pain, fever, back = tok.convert_tokens_to_ids(["▁pain", "▁fever", "▁back"])
    beams = [[0, sentinel0, back, pain, sentinel1, 1], [0, sentinel0, fever, 1, 0, 0],
             [0, sentinel0, back, pain, 1, 0], [0, sentinel1, 1, 0, 0, 0]]
    seen = {}

    def generate(input_ids=None, attention_mask=None, **kwargs):
        seen.update(kwargs, inputs=input_ids)
        return torch.tensor(beams * input_ids.shape[0])

    monkeypatch.setattr(prober.model, "generate", generate)
    qs = queries(["aspirin may treat [Y] .", "the cold may relieve [Y] ."], ["back pain"])
    assert prober.generate(qs, top_k=4) == [["back pain", "fever", "back pain", ""]] * 2
    assert seen["num_beams"] == seen["num_return_sequences"] == 4
    assert (seen["inputs"] == sentinel0).sum(1).tolist() == [1, 1]  # the slot is the sentinel
    assert prober.rank(qs, top_k=4) == [["back pain", "fever"]] * 2  # deduplicated, empty answer dropped


def test_generative_bart_aligns_designed_beams(tiny_bart, monkeypatch):
    from medlama.probers.generative import GenerativeProber

    prober = GenerativeProber(tiny_bart)
    assert prober.style == "bart"
    tok = prober.tokenizer
    outputs = ["aspirin may treat back pain .", "aspirin may treat fever.", "aspirin may treat ."]
    encoded = [tok(text)["input_ids"] for text in outputs]
    width = max(len(ids) for ids in encoded)
    seen = {}

    def generate(input_ids=None, attention_mask=None, **kwargs):
        seen.update(kwargs, inputs=input_ids)
        return torch.tensor([ids + [tok.pad_token_id] * (width - len(ids)) for ids in encoded])

    monkeypatch.setattr(prober.model, "generate", generate)
    qs = queries(["aspirin may treat [Y] ."], ["fever"])
    assert prober.generate(qs, top_k=3) == [["back pain", "fever", ""]]
    assert (seen["inputs"] == tok.mask_token_id).sum().item() == 1
    assert prober.rank(qs, top_k=3) == [["back pain", "fever"]]


@pytest.mark.parametrize("model", ["tiny_t5", "tiny_bart"])
def test_generative_real_models_give_ranked_unique_answers(model, request):
    from medlama.probers.generative import GenerativeProber, GenerativeSettings

    prober = GenerativeProber(request.getfixturevalue(model), GenerativeSettings(max_answer_tokens=4, batch_size=2))
    qs = queries(["aspirin may treat [Y] .", "the cold may relieve [Y] .", "[Y] may treat pain ."], ["pain"])
    raw = prober.generate(qs, top_k=3)
    assert [len(r) for r in raw] == [3, 3, 3]
    ranked = prober.rank(qs, top_k=3)
    for answers in ranked:
        assert len(answers) <= 3 and len(set(answers)) == len(answers) and all(answers)


# -- errors ---------------------------------------------------------------------------------------------------


def test_models_that_do_not_fit_the_method(tiny_encoder, tiny_mlm, tiny_t5, tmp_path):
    from transformers import GPT2Config

    from medlama.core.defaults import default_model_path
    from medlama.probers.generative import GenerativeProber
    from medlama.probers.mask_average import MaskAverageProber
    from medlama.probers.mask_predict import MaskPredictProber

    with pytest.raises(MedlamaInputError, match=r"the weights have no MLM head \(missing cls\.predictions.*"
                                                 r"mask predict, mask average and masked likelihood need .* --method retrieval"):
        MaskAverageProber(tiny_encoder)
    with pytest.raises(MedlamaInputError, match="the weights have no MLM head"):
        MaskPredictProber(default_model_path())  # the bundled sentence encoder
    with pytest.raises(MedlamaInputError, match="'t5' is a sequence-to-sequence model; .*use --method generative"):
        MaskPredictProber(tiny_t5)
    with pytest.raises(MedlamaInputError, match="'bert' is not a sequence-to-sequence model; generative probing"):
        GenerativeProber(tiny_mlm)
    GPT2Config(n_layer=1, n_embd=8, n_head=1).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(MedlamaInputError, match="'gpt2' has no masked-LM architecture"):
        MaskAverageProber(tmp_path / "gpt2")
    (tmp_path / "junk").mkdir()
    with pytest.raises(MedlamaInputError, match="not a model folder: no config.json"):
        MaskPredictProber(tmp_path / "junk")
    with pytest.raises(MedlamaInputError, match="not a model folder: no config.json"):
        GenerativeProber(tmp_path / "junk")


def test_incomplete_weights_and_tokenizers(tiny_mlm, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    from medlama.probers.generative import GenerativeProber, GenerativeSettings
    from medlama.probers.mask_average import MaskAverageProber

    broken = tmp_path / "broken"
    shutil.copytree(tiny_mlm, broken)
    weights = load_file(broken / "model.safetensors")
    del weights["bert.encoder.layer.1.output.dense.weight"]
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(MedlamaInputError, match=r"incomplete weights: 1 tensors missing \(bert\.encoder"):
        MaskAverageProber(broken)
    plain = save_t5(tmp_path / "t5-plain", extra_ids=0)
    with pytest.raises(MedlamaInputError, match="neither a <extra_id_0> sentinel .* nor a mask token"):
        GenerativeProber(plain)
    with pytest.raises(MedlamaInputError, match="style 'bart' needs a mask token"):
        GenerativeProber(plain, GenerativeSettings(style="bart"))
    with pytest.raises(MedlamaInputError, match="unknown generative style 'gpt'"):
        GenerativeSettings(style="gpt")


def test_bad_settings_and_query_sets(tiny_mlm):
    from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings
    from medlama.probers.registry import make_prober, settings_for

    with pytest.raises(MedlamaInputError, match="max tokens must be >= 1"):
        MaskAverageSettings(max_tokens=0)
    with pytest.raises(MedlamaInputError, match="has no candidates"):
        MaskAverageProber(tiny_mlm).rank(queries(["aspirin may treat [Y] ."]))
    for method in ("mask-average", "mask-predict", "generative"):  # layers are a retrieval setting only
        with pytest.raises(MedlamaInputError, match=rf"unknown {method} setting\(s\): 'layers'"):
            make_prober(method, tiny_mlm, {"layers": [1, 2]})
    settings = settings_for("mask-predict", {"beam_size": 2, "max_masks": 3, "to_candidates": False,
                                             "batch_size": 4}, preset="paper-order+order")
    prober = make_prober("mask-predict", tiny_mlm, settings)
    assert prober.settings()["decoding"] == "order+order"
    assert (prober.settings_.beam_size, prober.settings_.max_masks, prober.settings_.to_candidates) == (2, 3, False)


# -- the command ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_mlm_real_vocab(tmp_path_factory):
    """A tiny masked LM with the bundled model's (BERT uncased) vocabulary, for probing real MedLAMA queries."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from medlama.core.defaults import default_model_path

    folder = tmp_path_factory.mktemp("tiny-mlm-real-vocab")
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(0)
    BertForMaskedLM(bert_config(tokenizer.vocab_size)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_cli_runs_the_baselines(medlama_dir, tiny_mlm_real_vocab, tiny_t5, tmp_path, capsys):
    from medlama.cli import main

    out = tmp_path / "probe"
    common = ["probe", "--data", str(medlama_dir), "--relations", "associated_morphology_of"]
    status = main(common + ["--model", str(tiny_mlm_real_vocab), "--label", "tiny", "--method", "mask-average",
                            "mask-predict", "--max-tokens", "4", "--max-masks", "2", "--beam-size", "2",
                            "--raw-predictions", "--out", str(out)])
    assert status == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert [r["label"] for r in results] == ["mask-average:tiny", "mask-predict:tiny"]
    assert results[0]["settings"]["max_tokens"] == 4
    assert results[1]["settings"]["decoding"] == "independent" and results[1]["settings"]["beam_size"] == 2
    average, predict = predictions(out, "mask-average:tiny"), predictions(out, "mask-predict:tiny")
    assert len(average) == 158 and len(average[0]["predictions"]) == 10
    assert all(len(q["predictions"]) <= 4 for q in predict)  # 2 beams x 2 mask counts at most
    status = main(common + ["--model", str(tiny_t5), "--method", "generative", "--max-answer-tokens", "3",
                            "--out", str(out), "--overwrite"])
    assert status == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())[0]["settings"]["style"] == "t5"
    capsys.readouterr()
    status = main(common + ["--method", "mask-predict", "--out", str(out), "--overwrite"])  # bundled: no MLM head
    assert status == 2
    assert "the weights have no MLM head" in capsys.readouterr().err


def test_probe_scores_through_the_metric_module(tiny_mlm, monkeypatch):
    from medlama.probers.mask_average import MaskAverageProber

    prober = MaskAverageProber(tiny_mlm)
    design(prober, monkeypatch, lambda span, k: AVERAGE_TABLE.get((len(span), k), {}))
    qs = QuerySet(["a", "b"], ["r1", "r2"], ["aspirin may treat [Y] .", "the cold may relieve [Y] ."],
                  [["back pain"], ["pain"]], CANDIDATES)
    result = probe(prober, qs, label="designed")
    assert result.acc(1) == 0.5 and result.acc(5) == 1.0
    assert result.settings["method"] == "mask-average"
