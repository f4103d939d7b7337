"""Public names in place of local paths: the one set of rules for what a record or an upload may say of a path.

A local path means nothing on another machine and may say more than its owner wants (a home folder, a user
name), so results files, provenance blocks and everything pushed to the Hub name a local file or folder by
its last part. The rules, used by :mod:`medlama.core.provenance` (results), :mod:`medlama.publishing.public_names`
(uploads) and the probers' and UCM's records:

* :func:`is_absolute`: an absolute local path (POSIX, Windows drive or share, or ``~``-relative);
* :func:`public_path`: a path's last part (URLs and ``download`` stay whole);
* :func:`public_word`: a command-line word, or a recorded value, with an absolute path reduced to its
  last part (``--flag=/a/b`` -> ``--flag=b``); relative paths and Hub ids stay as typed in a local record,
  while what is uploaded (``relative=True``) reduces a relative local path too (``../models/gpt2`` ->
  ``gpt2``, ``./run`` -> ``run``: :func:`is_relative_local`);
* :func:`with_public_model`: a settings mapping whose ``model`` is reduced by :func:`public_word`, the
  one call every results file makes for the model it names;
* :func:`is_local_path` and :func:`public_model_name`: whether a model name is a local folder rather than a
  Hub id, and the name it is known by in public (its Hub id where one is known).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

__all__ = ["LOCAL_PATH", "is_absolute", "is_local_path", "is_relative_local", "public_command_line", "public_model_name",
           "public_path", "public_word", "with_public_model"]

#: An absolute local path inside free text (POSIX, ``~/``, or ``C:\\``): a whole parenthesised one (spaces
#: and all: earlier builds wrote ``MedLAMA `full` (/path/to/medlama)``), else up to a space, bracket or
#: quote; never the path part of a URL (preceded by ``:``, ``/`` or a word character).
LOCAL_PATH = re.compile(r"(?<=\()(?:~|[A-Za-z]:)?[\\/][^()]*(?=\))"
                        r"|(?<![\w:/.~(-])(?:~|[A-Za-z]:)?[\\/][^\s()\[\]`'\",;]*")
#: A Hub repository id: ``name`` or ``owner/name``.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?$")
#: A snapshot in the Hugging Face cache: ``.../models--<owner>--<name>/snapshots/<revision>/...``.
_HF_CACHE_SNAPSHOT = re.compile(r"(?:^|[\\/])models--(.+?)[\\/]snapshots[\\/]")


def is_absolute(value: str) -> bool:
    """An absolute local path: POSIX, Windows or ``~``-relative."""
    return PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute() or value.startswith("~")


def public_path(value: str) -> str:
    """A local path's last part (``/tmp/x/medlama`` -> ``medlama``); URLs and ``download`` stay as they are."""
    if re.match(r"^[a-z]+://", value) or value == "download":
        return value
    return re.split(r"[\\/]", value.rstrip("\\/"))[-1] or value


def is_relative_local(value: str) -> bool:
    """A relative path that names a local file or folder: ``./x`` or ``../x`` (either separator), or a word with
    a separator that exists here. Anything else with a slash (a Hub id ``you/medlama``, a date ``2026/11/26``, a
    ratio ``acc@1/macro``, a URL of any scheme) is not one."""
    if not value or any(c.isspace() for c in value) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        return False
    if value.startswith(("./", "../", ".\\", "..\\")):
        return True
    if not re.search(r"[\\/]", value):
        return False
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError):
        return False


def public_word(word: str, *, relative: bool = False) -> str:
    """A command-line word with an absolute or home-relative path reduced to its last part (a Windows path
    too, on any machine); the value of ``--flag=VALUE`` likewise. ``relative``: a relative local path too
    (:func:`is_relative_local`), as everything uploaded is. Anything else stays as typed."""
    if "=" in word and word.startswith("--"):
        key, _, value = word.partition("=")
        return f"{key}={public_word(value, relative=relative)}"
    if is_absolute(word) or (relative and is_relative_local(word)):
        return public_path(word)
    return word


def public_command_line(command: str) -> str:
    """A recorded command line (``shlex``-quoted words) with every local path, relative or absolute, reduced
    to its last part (:func:`public_word` with ``relative=True``); unbalanced quotes: its absolute paths."""
    try:
        words = shlex.split(command)
    except ValueError:
        return LOCAL_PATH.sub(lambda match: public_path(match.group(0)), command)
    return shlex.join(public_word(word, relative=True) for word in words)


def with_public_model(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` whose ``model``, a local path, is named by its last part (:func:`public_word`; a
    Hub id or a relative path stays as given, anything that is not a path is left alone)."""
    out = dict(settings)
    model = out.get("model")
    if isinstance(model, (str, os.PathLike)) and str(model):
        out["model"] = public_word(str(model))
    return out


def is_local_path(value: str) -> bool:
    """Whether ``value`` names a local file or folder rather than a Hub id (absolute, ``~``, ``./``, a
    backslash, more than one ``/``, or an existing path)."""
    if not value:
        return False
    if is_absolute(value) or "\\" in value:
        return True
    if value.startswith(("./", "../")) or value in (".", "..") or not _HUB_ID.match(value):
        return True
    return Path(value).expanduser().exists()


def public_model_name(name: str, path: str | None = None) -> str:
    """The name a model is known by in public: ``name`` when it is a Hub id (the bundled encoder's record
    names it so), else the Hub id of a Hugging Face cache snapshot, else the folder's name."""
    if name and not is_local_path(name):
        return name
    for candidate in (path, name):
        match = _HF_CACHE_SNAPSHOT.search(str(candidate or ""))
        if match:
            return match.group(1).replace("--", "/", 1)
    return public_path(str(name or path or "model"))
