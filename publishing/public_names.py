"""Public names in place of local paths: nothing pushed to the Hub may name a folder of the machine it came from.

The local copy of a build or a rewired model keeps its paths (they say where its inputs were); the upload
tree gets, instead of each one:

* a base model: its Hub id where one is known (the bundled encoder inside site-packages is
  ``sentence-transformers/all-MiniLM-L6-v2``; a snapshot in the Hugging Face cache is the repository it
  came from), else the folder's name;
* a corpus file, a dataset source or an index: the file or folder name (a corpus record keeps its SHA-256
  beside it, which identifies the file);
* a command line: the same command with each path reduced to its last part.

What counts as a local path and what a path's public part is are :mod:`medlama.core.public_paths`' rules, the
ones every results file follows too.

:func:`public_rewire_record` does this for a ``rewire_config.json`` record and returns the replacements the
other files of the model (its ``README.md``) need; :func:`public_build_info` for a dataset's
``build_info.json``.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medlama.core.public_paths import (LOCAL_PATH, is_absolute, is_local_path, is_relative_local, public_model_name,
                                       public_path)

#: The flags of ``medlama rewire`` whose values are paths (``--model`` gets the base model's public name).
_PATH_FLAGS = ("--corpus", "--out", "--resume-from")


def public_command(command: str, model: str | None = None) -> str:
    """``command`` with every path reduced to its last part; the ``--model`` value becomes ``model``."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: reduce whatever looks like a local path
        return LOCAL_PATH.sub(lambda match: public_path(match.group(0)), command)
    public, flag = [], None
    for word in words:
        if word.startswith("--"):
            flag = word
            public.append(word)
            continue
        if flag == "--model" and model is not None:
            word = model
        elif flag in _PATH_FLAGS or is_local_path(word) and "/" in word.replace("\\", "/"):
            word = public_path(word)
        public.append(word)
        if flag != "--corpus":  # --corpus takes several files; every other flag one value
            flag = None
    return " ".join(shlex.quote(word) for word in public)


def public_rewire_record(record: Mapping[str, Any], folder: str | Path | None = None) -> tuple[dict, dict[str, str]]:
    """(the ``rewire_config.json`` record without local paths, {local text: public text} for the other files).

    ``base_model.name``/``path`` and ``config.model`` become the base model's public name, each corpus
    ``path`` its file name (also where ``cloze.skipped_examples`` names it), ``command`` the public command;
    ``folder`` (the model folder itself) its name.
    Only paths (absolute, or relative with a separator: ``../my-bert``) and the whole command are replaced in
    other text: a bare name such as ``my-bert`` could match unrelated words.
    """
    public = copy.deepcopy(dict(record))
    replacements: dict[str, str] = {}

    def replace(local: Any, by: str) -> str:
        if isinstance(local, str) and local != by and (is_absolute(local) or is_relative_local(local)):
            replacements[local] = by
        return by

    base = public.get("base_model") if isinstance(public.get("base_model"), dict) else {}
    config = public.get("config") if isinstance(public.get("config"), dict) else {}
    model_texts = {value for value in (base.get("name"), base.get("path"), config.get("model"))
                   if isinstance(value, str)}
    name = public_model_name(str(base.get("name") or config.get("model") or ""), base.get("path"))
    for owner, key in ((base, "name"), (base, "path"), (config, "model")):
        if isinstance(owner.get(key), str):
            owner[key] = replace(owner[key], name)
    for item in public.get("corpus") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            item["path"] = replace(item["path"], item.get("name") or public_path(item["path"]))
    cloze = public.get("cloze") if isinstance(public.get("cloze"), dict) else {}
    if isinstance(cloze.get("skipped_examples"), list):  # "<corpus path>, line N" (--skip-short-lines)
        cloze["skipped_examples"] = [replace_local(example, replacements) if isinstance(example, str) else example
                                     for example in cloze["skipped_examples"]]
    if isinstance(public.get("command"), str):
        command = public_command(public["command"], name)
        if command != public["command"]:
            replacements[public["command"]] = command
        for word in _words(public["command"]):
            replace(word, name if word in model_texts else public_path(word))
        public["command"] = command
    if folder is not None:
        for local in (str(folder), str(Path(folder).resolve())):
            replace(local, Path(folder).resolve().name)
    return public, replacements


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return []


def replace_local(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with each local string replaced by its public one, longest first (a command before its paths)."""
    for local in sorted(replacements, key=len, reverse=True):
        text = text.replace(local, replacements[local])
    return text


def public_build_info(text: str) -> str:
    """``build_info.json`` without local paths: path-like fields keep only their last part.

    BioLAMA / MedLAMA: ``report.source`` and ``report.origin``. Context-variance sets: every
    ``sources[].paths`` entry (the corpus files) and ``sources[].index`` (the index folder), and any
    absolute path inside the free-text ``origin`` (builds made before ``origin`` was kept path-free).
    """
    try:
        info = json.loads(text)
    except ValueError:
        return text
    if not isinstance(info, dict):
        return text
    report = info.get("report")
    if isinstance(report, dict):
        for key in ("source", "origin"):
            if isinstance(report.get(key), str):
                report[key] = public_path(report[key])
    if isinstance(info.get("origin"), str):
        info["origin"] = LOCAL_PATH.sub(lambda match: public_path(match.group(0)), info["origin"])
    sources = info.get("sources")
    for source in sources if isinstance(sources, list) else []:
        if not isinstance(source, dict):
            continue
        if isinstance(source.get("paths"), list):
            source["paths"] = [public_path(p) if isinstance(p, str) else p for p in source["paths"]]
        if isinstance(source.get("index"), str):
            source["index"] = public_path(source["index"])
    return json.dumps(info, indent=2) + "\n"
