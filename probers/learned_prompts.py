"""Learned prompts (OptiPrompt, Zhong et al. 2021, as BioLAMA runs it): their templates, the folder
``medlama optiprompt`` writes, its identity, and the queries they make for mask predict.

A learned prompt replaces a relation's manual template by trainable input vectors ``[V1] ... [Vn]`` around
the subject ``[X]`` and the object slot ``[Y]``:

* ``manual`` init (BioLAMA's default): each token of the manual template but the slots becomes one ``[Vi]``
  starting from that token's input embedding, the final ``.`` included: ``[X] has symptoms such as [Y] .`` ->
  ``[X] [V1] [V2] [V3] [V4] [Y] [V5]``. The tokens are those the manual query is read as
  (:meth:`~medlama.probers.mlm.MaskedLM.split`: the text before a slot without its trailing space, the text
  after the last slot as it is), so a byte-level BPE's ``[X]'s colour is [Y].`` gives ``'s`` and ``.``, not the
  spaced ``Ġ'``, ``s`` and ``Ġ.`` (WordPiece reads both alike, as BioLAMA's spaced words).
* ``random`` init: ``[X] [V1] ... [Vn] [Y] .`` with ``n`` random vectors (the ``.`` stays a token).

A query of a relation is the manual query (``[X]`` filled, as the built folder's ``query`` column) cut
around its subject (:func:`subject_of`): the subject's tokens, the template's vectors (ids past the input
embedding table, :class:`~medlama.probers.mlm.MaskedLM` splices them in) and its literal tokens. With the
manual init and no training, each vector is the embedding of the token it replaces, so mask predict decodes
exactly what it decodes from the manual prompt.

The folder (:data:`PROMPTS_FILE` marks it): ``prompts.json`` (format, base model, config and tokenizer
identity, training and decoding settings, data, the train and dev splits' records
(:mod:`medlama.probers.prompt_data`), and per relation its manual and learned templates, vector file and its
SHA-256, dev curve and chosen epoch), ``vectors/<relation>.safetensors`` (one float32 tensor ``vectors``, n x
hidden) and a model-card README. :func:`prompts_identity` is a content hash over the base model, the training
data's record and every relation's templates and vectors (the timings and dev curve left out: the folder's
ownership record, which holds every file's SHA-256, vouches for those).
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
from medlama.core.integrity import FILES_KEY, change_since, safetensors_problem
from medlama.core.models import is_hub_id
from medlama.core.ownership import OWNER_NAME, owner_record
from medlama.core.public_paths import public_word
from medlama.probers.mlm import MaskedLM, SplitQuery
from medlama.probers.prompt_data import check_record, fingerprint, overlap

PROMPTS_FILE = "prompts.json"
OUTPUT_KIND = "optiprompt"
FORMAT = "medlama-optiprompt/1"
VECTORS_DIR = "vectors"
INITS = ("manual", "random")
_SLOTS = ("[X]", "[Y]")


def check_manual(manual: str, relation: str) -> None:
    """A template with exactly one ``[X]`` and one ``[Y]``, else an error naming the relation."""
    if manual.count(SUBJECT_PLACEHOLDER) != 1 or manual.count(MASK_PLACEHOLDER) != 1:
        raise MedlamaInputError(f"relation {relation!r}: the manual template {manual!r} needs exactly one "
                                f"{SUBJECT_PLACEHOLDER} and one {MASK_PLACEHOLDER}")


def _pieces(manual: str) -> list[str]:
    """The manual template cut at its slots: ``[text, slot, text, slot, text]``."""
    first = min(_SLOTS, key=manual.index)
    second = _SLOTS[1] if first == _SLOTS[0] else _SLOTS[0]
    lead, rest = manual.split(first)
    middle, tail = rest.split(second)
    return [lead, first, middle, second, tail]


def _subject_text(manual: str, subject: str) -> str:
    """The subject as the manual query's tokenizer reads it: after a space when the template puts one before
    ``[X]`` (a byte-level BPE marks it), else as it is."""
    before = manual.split(SUBJECT_PLACEHOLDER)[0]
    return (" " if before and before[-1].isspace() else "") + subject


def initial_template(lm: MaskedLM, manual: str, init: str, prompt_tokens: int) -> tuple[str, list[int]]:
    """The learned template of a relation and, for the ``manual`` init, the token id each ``[Vi]`` starts from
    (see the module docstring)."""
    if init == "random":
        return " ".join(["[X]", *(f"[V{i + 1}]" for i in range(prompt_tokens)), "[Y]", "."]), []
    words: list[str] = []
    sources: list[int] = []
    pieces = _pieces(manual)
    for at, piece in enumerate(pieces):
        if piece in _SLOTS:
            words.append(piece)
            continue
        # as MaskedLM.split reads the manual query: the text before a slot without its trailing space (a
        # space before [X] is the subject's, before [Y] the answer's), the text after the last slot as it is
        for token in lm.ids(piece if at == len(pieces) - 1 else piece.rstrip()):
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
        parts: list[list[int]] = [[], []]
        side = 0
        for item in parse_template(self.template):
            if item == MASK_PLACEHOLDER:
                side = 1
            elif item == SUBJECT_PLACEHOLDER:
                parts[side].extend(lm.ids(_subject_text(self.manual, subject)))
            elif isinstance(item, int):
                parts[side].append(lm.rows + offset + item)
            else:
                parts[side].extend(lm.ids(" " + item))
        return SplitQuery(tuple(parts[0]), tuple(parts[1]), lm.split(text).space_before)

    def shown(self, text: str, mask_token: str) -> str:
        """What the model reads for the query ``text``: the learned template with its subject and the mask token
        filled in, each learned vector as its ``[Vi]`` marker (a literal word as it is)."""
        subject = subject_of(self.manual, text)
        return " ".join(subject if word == SUBJECT_PLACEHOLDER else mask_token if word == MASK_PLACEHOLDER else word
                        for word in self.template.split())


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


#: Config keys that say how a model was saved, loaded or asked to report, not what its logits are.
_CONFIG_NOISE = ("transformers_version", "torch_dtype", "dtype", "architectures", "output_hidden_states",
                 "output_attentions", "return_dict", "use_cache", "torchscript")


def config_sha256(config: Any) -> str:
    """SHA-256 of what a model's config says it computes (its activation, sizes, layer norm, ...): the same
    weights under another config are another model. The values that differ from the class's defaults (a
    transformers release that adds a setting at its default changes nothing)."""
    values = {key: value for key, value in config.to_diff_dict().items()
              if not key.startswith("_") and key not in _CONFIG_NOISE}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


#: The parts of a base model's identity, as :meth:`PromptSet.check_base` names them.
BASE_KEYS = (("model", "model_sha256"), ("config", "config_sha256"), ("tokenizer", "tokenizer_sha256"))


def base_identity(lm: MaskedLM) -> dict:
    """What learned prompts are trained for: the model's weights, its config and the tokenizer, by content
    hash."""
    return {"model_sha256": lm.weights_sha256(), "config_sha256": config_sha256(lm.model.config),
            "tokenizer_sha256": tokenizer_sha256(lm.tokenizer),
            "hidden_size": int(lm.model.get_input_embeddings().embedding_dim)}


def prompts_identity(record: Mapping[str, Any]) -> str:
    """The content hash of a prompts folder's record: base model (weights, config, tokenizer), the data it was
    trained and selected on, each relation's templates and vectors."""
    core = {"base": {key: record["base"][key] for _, key in BASE_KEYS},
            "training_data": record["training_data"],
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

        try:
            path = Path(huggingface_hub.snapshot_download(repo, revision=revision or None))
        except (OSError, ValueError) as error:  # offline, no such repository or revision, no access
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise MedlamaInputError(f"cannot fetch the learned prompts from the Hub: {reason}", file=text) from None
    if not (path / PROMPTS_FILE).is_file():
        raise MedlamaInputError(f"not a prompts folder of `medlama optiprompt` (no {PROMPTS_FILE})", file=path)
    return path


def identity_of(settings: Any) -> str | None:
    """The identity of the prompts folder that ``settings.prompts`` names (``None`` without one): what a resumed
    probe must decode with again."""
    prompts = getattr(settings, "prompts", None)
    return None if prompts is None else PromptSet.read(prompts).identity


def _check_files(path: Path, record: Mapping[str, Any]) -> None:
    """Refuse a file of the folder that is not as ``medlama optiprompt`` wrote it: a vectors file cut short
    (safetensors' own error names no file), or (where the folder's ownership record lists the files' SHA-256)
    ``prompts.json`` or a vectors file changed since."""
    written = (owner_record(path) or {}).get(FILES_KEY)
    relations = record.get("relations")
    names = [PROMPTS_FILE, *(rel.get("file") for rel in (relations.values() if isinstance(relations, dict) else ())
                             if isinstance(rel, dict) and isinstance(rel.get("file"), str))]
    for name in names:
        file = path / name
        if not file.is_file():
            raise MedlamaInputError("a damaged prompts folder: the file is missing", file=file)
        problem = safetensors_problem(file) if name.endswith(".safetensors") else None
        if problem:
            raise MedlamaInputError(f"a damaged prompts folder: {problem}; train the prompts again or copy the "
                                    "folder again", file=file)
        entry = written.get(name) if isinstance(written, dict) else None
        if isinstance(written, dict) and not isinstance(entry, dict):
            raise MedlamaInputError(f"not a file `medlama optiprompt` wrote (the folder's ownership record "
                                    f"{OWNER_NAME} does not list it); train the prompts again", file=file)
        change = change_since(file, entry) if isinstance(entry, dict) else None
        if change:
            raise MedlamaInputError(f"changed since `medlama optiprompt` wrote it ({change}, by the folder's "
                                    f"ownership record {OWNER_NAME}): what it records would not be what was "
                                    "trained; train the prompts again", file=file)


@dataclass(frozen=True)
class PromptSet:
    """A prompts folder read back: its record and each relation's :class:`LearnedPrompt`."""

    path: Path
    record: dict
    prompts: dict[str, LearnedPrompt]

    @classmethod
    def read(cls, prompts: str | Path) -> "PromptSet":
        """The folder ``prompts`` names, checked (its files as written, its vectors, its identity); read once
        while its files are unchanged (a probe asks for it at its checks, its prober and its resume record)."""
        path = resolve_prompts(prompts)
        stamp = tuple((p.relative_to(path).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                      for p in sorted(path.rglob("*")) if p.is_file())
        cached = _READ.get(path.resolve())
        if cached is not None and cached[0] == stamp:
            return cached[1]
        loaded = cls._read(path)
        _READ[path.resolve()] = (stamp, loaded)
        return loaded

    @classmethod
    def _read(cls, path: Path) -> "PromptSet":
        from safetensors import SafetensorError  # safetensors only when prompts are read
        from safetensors.torch import load_file  # (and torch with it)

        try:
            record = json.loads((path / PROMPTS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise MedlamaInputError(f"a damaged prompts folder: {error}", file=path / PROMPTS_FILE) from None
        _check_files(path, record if isinstance(record, dict) else {})
        try:
            if record.get("format") != FORMAT:
                raise ValueError(f"format {record.get('format')!r}, not {FORMAT!r}")
            for split in ("train", "dev"):
                check_record(record["training_data"].get(split))
            loaded = {}
            for name, rel in record["relations"].items():
                try:
                    vectors = load_file(str(path / rel["file"]))["vectors"]
                except SafetensorError as error:
                    raise ValueError(f"{rel['file']} cannot be read ({error})") from None
                if vectors_sha256(vectors) != rel["vectors_sha256"]:
                    raise ValueError(f"{rel['file']} differs from the SHA-256 recorded for it")
                if vectors.shape[0] < vector_count(rel["template"]):
                    raise ValueError(f"{rel['file']} has fewer vectors than its template uses")
                loaded[name] = LearnedPrompt(name, rel["manual"], rel["template"], vectors)
            if prompts_identity(record) != record.get("identity"):
                raise ValueError("its identity does not match its content")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            what = f"no {error}" if isinstance(error, KeyError) else str(error)
            raise MedlamaInputError(f"a damaged prompts folder: {what}", file=path) from None
        return cls(path, record, loaded)

    @property
    def identity(self) -> str:
        return self.record["identity"]

    def check_base(self, lm: MaskedLM) -> None:
        """Refuse a model (weights or config) or tokenizer other than the one the prompts were trained for,
        naming which."""
        now, then = base_identity(lm), self.record["base"]
        wrong = [what for what, key in BASE_KEYS if now[key] != then.get(key)]
        if wrong:
            model = then.get("model") or {}
            shown = ", ".join(f"{what} {str(then.get(key))[:12]}..." for what, key in BASE_KEYS)
            now_shown = ", ".join(f"{what} {now[key][:12]}..." for what, key in BASE_KEYS)
            raise MedlamaInputError(
                f"these prompts were trained for another {' and '.join(wrong)}: "
                f"{model.get('id') or model.get('name') or '?'} ({shown}), not {lm.model_path} ({now_shown}); "
                "learned vectors only mean something to the model they were trained with", file=self.path)

    def check_relations(self, relations: Sequence[str]) -> None:
        missing = sorted(set(relations) - set(self.prompts))
        if missing:
            raise MedlamaInputError(f"no learned prompt for relation(s) {', '.join(missing)} (the folder has "
                                    f"{', '.join(sorted(self.prompts)) or 'none'}); train them with medlama "
                                    "optiprompt --relations, or probe only the relations it has", file=self.path)

    def check_queries(self, queries: Any, *, allow_train_overlap: bool = False) -> dict:
        """Refuse a probe of ``queries`` (a ``QuerySet``) with a relation these prompts lack, on the split they
        were trained on, or (unless ``allow_train_overlap``) of facts they were trained on; returns what a
        result records of it (:meth:`probed`)."""
        self.check_relations(sorted(set(queries.relations)))
        self.check_split(queries.info.get("split"))
        record = self.probed(queries, allow_train_overlap=allow_train_overlap)
        seen = record["train_overlap"]
        if seen["queries"] and not allow_train_overlap:
            train = self.record["training_data"]["train"]
            relation, subject = seen["first"]
            raise MedlamaInputError(
                f"{seen['queries']} of the {len(queries)} probed queries ask facts these prompts were trained on "
                f"(the {train['split']!r} split of their data, fingerprint {train['sha256'][:12]}...; first: "
                f"{relation}, subject {subject!r}): scoring them measures memorisation, not knowledge; probe data "
                "built from the release the prompts were trained on, or give --allow-train-overlap (the "
                "setting allow_train_overlap) to probe anyway (the overlap is recorded in results.json)",
                file=self.path)
        return record

    def check_split(self, split: str | None) -> None:
        train = self.record.get("training", {}).get("train_split", "train")
        if split == train:
            raise MedlamaInputError(f"these prompts were trained on the {train!r} split: probing them on it "
                                    "measures memorisation, not knowledge; probe the test split", file=self.path)

    def probed(self, queries: Any, *, allow_train_overlap: bool = False) -> dict:
        """What a result records of probing ``queries`` with these prompts: the split and whether it chose the
        kept epochs, and how many queries ask facts of the prompts' train and dev data."""
        dev = self.record.get("training", {}).get("dev_split", "dev")
        facts = [(relation, subject_of(self.prompts[relation].manual, text), gold)
                 for relation, text, gold in zip(queries.relations, queries.texts, queries.gold)
                 if relation in self.prompts]
        out: dict[str, Any] = {"split": queries.info.get("split"),
                               "selected_on_this_split": queries.info.get("split") == dev}
        for split in ("train", "dev"):
            found = overlap(self.record["training_data"][split], facts)
            out[f"{split}_overlap"] = {"queries": len(found), "first": list(found[0]) if found else None}
        out["train_overlap"]["allowed"] = allow_train_overlap
        return out

    def warnings(self, probed: Mapping[str, Any]) -> list[str]:
        """Why the scores of a probe (``probed``, from :meth:`check_queries`) are optimistic, one line each."""
        lines = []
        if probed["selected_on_this_split"]:
            lines.append(f"these prompts' epochs were chosen by acc@1 on the {probed['split']!r} split being "
                         "probed: its scores are optimistic (recorded in results.json); the test split is the "
                         "unbiased one")
        elif probed["dev_overlap"]["queries"]:
            lines.append(f"{probed['dev_overlap']['queries']} probed queries ask facts of the data that chose these "
                         "prompts' epochs (their dev split): their scores are optimistic (recorded in results.json)")
        if probed["train_overlap"]["queries"]:
            lines.append(f"{probed['train_overlap']['queries']} probed queries ask facts these prompts were trained "
                         "on (--allow-train-overlap; recorded in results.json)")
        return lines

    def note(self) -> dict:
        """What a result records of the prompts: identity, base model, training settings and data, relations."""
        record = self.record
        return {"identity": self.identity, "path": public_word(str(self.path)), "base": record["base"],
                "training": record.get("training"), "decoding": record.get("decoding"),
                "training_data": {split: fingerprint(item) for split, item in record["training_data"].items()},
                "relations": {name: {"template": rel["template"], "best_epoch": rel.get("best_epoch")}
                              for name, rel in sorted(record["relations"].items())}}


#: Prompt folders read in this process: ``{folder: (its files' names, sizes and times, what was read)}``.
_READ: dict[Path, tuple[tuple, PromptSet]] = {}
