"""Learned prompts (OptiPrompt, Zhong et al. 2021, as BioLAMA runs it): their templates, the folder
``medlama optiprompt`` writes, its identity, and the queries they make for mask predict.

A learned prompt replaces a relation's manual template by trainable input vectors ``[V1] ... [Vn]`` around
the subject ``[X]`` and the object slot ``[Y]``:

* ``manual`` init (BioLAMA's default): the manual template (``[X]`` and ``[Y]`` spaced apart, whitespace
  collapsed, as BioLAMA does) is split on whitespace; every word but the slots is tokenized as it reads after
  a space, and each of its tokens becomes one ``[Vi]`` starting from that token's input embedding, the final
  ``.`` included: ``[X] has symptoms such as [Y] .`` -> ``[X] [V1] [V2] [V3] [V4] [Y] [V5]``.
* ``random`` init: ``[X] [V1] ... [Vn] [Y] .`` with ``n`` random vectors (the ``.`` stays a token).

A query of a relation is the manual query (``[X]`` filled, as the built folder's ``query`` column) cut
around its subject (:func:`subject_of`): the subject's tokens, the template's vectors (ids past the input
embedding table, :class:`~medlama.probers.mlm.MaskedLM` splices them in) and its literal tokens. With the
manual init and no training, each vector is the embedding of the token it replaces, so mask predict decodes
exactly what it decodes from the manual prompt.

The folder (:data:`PROMPTS_FILE` marks it): ``prompts.json`` (format, base model and tokenizer identity,
training and decoding settings, data, and per relation its manual and learned templates, vector file and
its SHA-256, dev curve and chosen epoch), ``vectors/<relation>.safetensors`` (one float32 tensor
``vectors``, n x hidden) and a model-card README. :func:`prompts_identity` is a content hash over the base
model, the tokenizer and every relation's templates and vectors (the timings and dev curve left out).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.core.defaults import MASK_PLACEHOLDER, SUBJECT_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.core.models import is_hub_id
from medlama.core.public_paths import public_word
from medlama.probers.mlm import MaskedLM, SplitQuery

PROMPTS_FILE = "prompts.json"
OUTPUT_KIND = "optiprompt"
FORMAT = "medlama-optiprompt/1"
VECTORS_DIR = "vectors"
INITS = ("manual", "random")
_SLOTS = ("[X]", "[Y]")


def spaced(manual: str) -> str:
    """The manual template as BioLAMA reads it: ``[X]`` and ``[Y]`` spaced apart, whitespace collapsed."""
    return " ".join(manual.replace(SUBJECT_PLACEHOLDER, f" {SUBJECT_PLACEHOLDER} ")
                    .replace(MASK_PLACEHOLDER, f" {MASK_PLACEHOLDER} ").split())


def check_manual(manual: str, relation: str) -> None:
    """A template with exactly one ``[X]`` and one ``[Y]``, else an error naming the relation."""
    if manual.count(SUBJECT_PLACEHOLDER) != 1 or manual.count(MASK_PLACEHOLDER) != 1:
        raise MedlamaInputError(f"relation {relation!r}: the manual template {manual!r} needs exactly one "
                                f"{SUBJECT_PLACEHOLDER} and one {MASK_PLACEHOLDER}")


def initial_template(lm: MaskedLM, manual: str, init: str, prompt_tokens: int) -> tuple[str, list[int]]:
    """The learned template of a relation and, for the ``manual`` init, the token id each ``[Vi]`` starts from
    (see the module docstring)."""
    if init == "random":
        return " ".join(["[X]", *(f"[V{i + 1}]" for i in range(prompt_tokens)), "[Y]", "."]), []
    words, sources = [], []
    for word in spaced(manual).split():
        if word in _SLOTS:
            words.append(word)
            continue
        for token in lm.ids(" " + word):
            sources.append(token)
            words.append(f"[V{len(sources)}]")
    return " ".join(words), sources


def parse_template(template: str) -> list[str | int]:
    """The items of a learned template: ``"[X]"``, ``"[Y]"``, a vector index (``[V3]`` -> 2) or a literal word."""
    items: list[str | int] = []
    for word in template.split():
        if word.startswith("[V") and word.endswith("]") and word[2:-1].isdigit():
            items.append(int(word[2:-1]) - 1)
        else:
            items.append(word)
    if items.count("[X]") != 1 or items.count("[Y]") != 1:
        raise MedlamaInputError(f"a learned template needs one [X] and one [Y]: {template!r}")
    return items


def vector_count(template: str) -> int:
    return 1 + max((item for item in parse_template(template) if isinstance(item, int)), default=-1)


def subject_of(manual: str, text: str) -> str:
    """The subject of ``text``, a query built from ``manual`` (``[X]`` filled); an error when it is not one."""
    before, after = manual.split(SUBJECT_PLACEHOLDER)
    if not (text.startswith(before) and text.endswith(after)) or len(text) < len(before) + len(after):
        raise MedlamaInputError(f"the query {text!r} was not made from the manual template {manual!r} that the "
                                "learned prompt was trained from")
    return text[len(before):len(text) - len(after)]


@dataclass(frozen=True)
class LearnedPrompt:
    """One relation's learned prompt: its ``manual`` template, learned ``template`` and ``vectors``
    (a float32 tensor, one row per ``[Vi]``)."""

    relation: str
    manual: str
    template: str
    vectors: Any

    def split(self, lm: MaskedLM, text: str, offset: int = 0) -> SplitQuery:
        """The query ``text`` (its manual query) as ids around the slot, the vectors as ids ``lm.rows +
        offset + i``."""
        subject = subject_of(self.manual, text)
        lead = spaced(self.manual).split(SUBJECT_PLACEHOLDER)[0]
        parts: list[list[int]] = [[], []]
        side = 0
        for item in parse_template(self.template):
            if item == MASK_PLACEHOLDER:
                side = 1
            elif item == SUBJECT_PLACEHOLDER:
                parts[side].extend(lm.ids((" " if lead else "") + subject))
            elif isinstance(item, int):
                parts[side].append(lm.rows + offset + item)
            else:
                parts[side].extend(lm.ids(" " + item))
        return SplitQuery(tuple(parts[0]), tuple(parts[1]), lm.split(text).space_before)


def vectors_sha256(vectors: Any) -> str:
    """SHA-256 of a float32 tensor's shape and bytes."""
    import torch  # torch only when vectors are hashed

    data = vectors.detach().to("cpu", torch.float32).contiguous()
    return hashlib.sha256(f"{tuple(data.shape)}\0".encode() + data.numpy().tobytes()).hexdigest()


def tokenizer_sha256(tokenizer: Any) -> str:
    """SHA-256 of what a tokenizer maps text to: its vocabulary, special tokens and the ids of a fixed sample
    (case and accent handling included)."""
    sample = "Aspirin Ümlaut naïve 5-HT2A receptor, (IL-6) [X] [Y]."
    record = {"vocab": sorted(tokenizer.get_vocab().items()), "special": sorted(map(str, tokenizer.all_special_tokens)),
              "sample": tokenizer(sample, add_special_tokens=True)["input_ids"], "class": type(tokenizer).__name__}
    return hashlib.sha256(json.dumps(record, ensure_ascii=False).encode()).hexdigest()


def base_identity(lm: MaskedLM) -> dict:
    """What learned prompts are trained for: the model's weights and the tokenizer, by content hash."""
    return {"model_sha256": lm.weights_sha256(), "tokenizer_sha256": tokenizer_sha256(lm.tokenizer),
            "hidden_size": int(lm.model.get_input_embeddings().embedding_dim)}


def prompts_identity(record: Mapping[str, Any]) -> str:
    """The content hash of a prompts folder's record: base model, tokenizer, each relation's templates and
    vectors."""
    core = {"base": {key: record["base"][key] for key in ("model_sha256", "tokenizer_sha256")},
            "relations": {name: {key: rel[key] for key in ("manual", "template", "vectors_sha256")}
                          for name, rel in sorted(record["relations"].items())}}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()


def write_prompts(folder: Path, record: Mapping[str, Any], prompts: Mapping[str, LearnedPrompt]) -> dict:
    """Write ``prompts.json`` and the vectors into ``folder`` (a staging folder); returns the record written
    (each relation's vector file and SHA-256 added, and the identity)."""
    from safetensors.torch import save_file  # safetensors only when prompts are written

    (folder / VECTORS_DIR).mkdir(parents=True, exist_ok=True)
    record = json.loads(json.dumps(record))
    for name, prompt in prompts.items():
        file = f"{VECTORS_DIR}/{name}.safetensors"
        save_file({"vectors": prompt.vectors.detach().cpu().float().contiguous()}, str(folder / file))
        record["relations"][name].update(file=file, vectors_sha256=vectors_sha256(prompt.vectors),
                                         manual=prompt.manual, template=prompt.template)
    record["identity"] = prompts_identity(record)
    (folder / PROMPTS_FILE).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def resolve_prompts(prompts: str | Path) -> Path:
    """The local folder of ``prompts``: a folder of ``medlama optiprompt``, or a Hub model repository id
    (``you/biobert-optiprompt``, ``@REVISION`` allowed), downloaded to the Hub cache."""
    text = str(prompts)
    path = Path(text).expanduser()
    if not path.exists():
        repo, _, revision = text.partition("@")
        if not is_hub_id(repo):
            raise MedlamaInputError("prompts folder does not exist (and it is not a Hub id either)", file=text)
        import huggingface_hub  # the Hub client only when prompts are downloaded

        path = Path(huggingface_hub.snapshot_download(repo, revision=revision or None))
    if not (path / PROMPTS_FILE).is_file():
        raise MedlamaInputError(f"not a prompts folder of `medlama optiprompt` (no {PROMPTS_FILE})", file=path)
    return path


def identity_of(settings: Any) -> str | None:
    """The identity recorded in the prompts folder that ``settings.prompts`` names (``None`` without one): what
    a resumed probe must decode with again."""
    prompts = getattr(settings, "prompts", None)
    if prompts is None:
        return None
    try:
        return json.loads((resolve_prompts(prompts) / PROMPTS_FILE).read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class PromptSet:
    """A prompts folder read back: its record and each relation's :class:`LearnedPrompt`."""

    path: Path
    record: dict
    prompts: dict[str, LearnedPrompt]

    @classmethod
    def read(cls, prompts: str | Path) -> "PromptSet":
        from safetensors.torch import load_file  # safetensors only when prompts are read

        path = resolve_prompts(prompts)
        try:
            record = json.loads((path / PROMPTS_FILE).read_text(encoding="utf-8"))
            if record.get("format") != FORMAT:
                raise ValueError(f"format {record.get('format')!r}, not {FORMAT!r}")
            loaded = {}
            for name, rel in record["relations"].items():
                vectors = load_file(str(path / rel["file"]))["vectors"]
                if vectors_sha256(vectors) != rel["vectors_sha256"]:
                    raise ValueError(f"{rel['file']} differs from the SHA-256 recorded for it")
                if vectors.shape[0] < vector_count(rel["template"]):
                    raise ValueError(f"{rel['file']} has fewer vectors than its template uses")
                loaded[name] = LearnedPrompt(name, rel["manual"], rel["template"], vectors)
            if prompts_identity(record) != record.get("identity"):
                raise ValueError("its identity does not match its content")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise MedlamaInputError(f"a damaged prompts folder: {error}", file=path) from None
        return cls(path, record, loaded)

    @property
    def identity(self) -> str:
        return self.record["identity"]

    def check_base(self, lm: MaskedLM) -> None:
        """Refuse a model or tokenizer other than the one the prompts were trained for, naming which."""
        now, then = base_identity(lm), self.record["base"]
        wrong = [what for what, key in (("model", "model_sha256"), ("tokenizer", "tokenizer_sha256"))
                 if now[key] != then[key]]
        if wrong:
            model = then.get("model") or {}
            raise MedlamaInputError(
                f"these prompts were trained for another {' and '.join(wrong)}: "
                f"{model.get('id') or model.get('name') or '?'} (weights SHA-256 {then['model_sha256'][:12]}..., "
                f"tokenizer {then['tokenizer_sha256'][:12]}...), not {lm.model_path} ({now['model_sha256'][:12]}..., "
                f"{now['tokenizer_sha256'][:12]}...); learned vectors only mean something to the model they were "
                "trained with", file=self.path)

    def check_relations(self, relations: Sequence[str]) -> None:
        missing = sorted(set(relations) - set(self.prompts))
        if missing:
            raise MedlamaInputError(f"no learned prompt for relation(s) {', '.join(missing)} (the folder has "
                                    f"{', '.join(sorted(self.prompts)) or 'none'}); train them with medlama "
                                    "optiprompt --relations, or probe only the relations it has", file=self.path)

    def check_queries(self, queries: Any) -> None:
        """Refuse a probe of ``queries`` (a ``QuerySet``) with a relation these prompts lack, or on the split
        they were trained on."""
        self.check_relations(sorted(set(queries.relations)))
        self.check_split(queries.info.get("split"))

    def check_split(self, split: str | None) -> None:
        train = self.record.get("training", {}).get("train_split", "train")
        if split == train:
            raise MedlamaInputError(f"these prompts were trained on the {train!r} split: probing them on it "
                                    "measures memorisation, not knowledge; probe test (or dev)", file=self.path)

    def note(self) -> dict:
        """What a result records of the prompts: identity, base model, training settings, relations."""
        record = self.record
        return {"identity": self.identity, "path": public_word(str(self.path)), "base": record["base"],
                "training": record.get("training"), "decoding": record.get("decoding"),
                "relations": {name: {"template": rel["template"], "best_epoch": rel.get("best_epoch")}
                              for name, rel in sorted(record["relations"].items())}}
