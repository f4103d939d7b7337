"""The upload tree and its manifest, shared by ``push-dataset``, ``push-model`` and ``push-metric``
(:mod:`medlama.publishing.hub` describes the commands).

Each command writes the *upload tree*, the exact files that go to the repository, and then either uploads it
(:func:`finish`: ``HfApi.upload_folder``, one commit, after creating and gating the repository) or, with
``dry_run=DIR``, leaves it in ``DIR`` with ``manifest.json`` (every file's size and SHA-256). Before either, no
text file of the tree may name a local path (:func:`check_tree_names_no_local_path`). A Hub that cannot be
reached, or refuses a request, is a :class:`MedlamaInputError` naming the repository, the step and the cause
(never the token). The token comes from the ``token`` argument, ``HF_TOKEN`` or ``hf auth login``.
"""

from __future__ import annotations

import json
import os
import re
import site
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from medlama.core.atomic import atomic_directory, check_replaceable
from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError

MANIFEST_NAME = "manifest.json"

#: Files never read by the local-path check: binary by nature (weights, Arrow/Parquet, archives, pickles).
#: Any other file holding a null byte is taken as binary too.
BINARY_SUFFIXES = frozenset({
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".msgpack", ".npy", ".npz", ".pkl",
    ".pickle", ".parquet", ".arrow", ".gz", ".bz2", ".xz", ".zst", ".zip", ".tar", ".model", ".png", ".jpg",
    ".jpeg", ".gif", ".ico", ".pdf"})
#: System-wide folders that name nobody's machine: not checked as a "parent" or Python prefix ("/usr").
_SHARED_FOLDERS = frozenset({"/", "/usr", "/usr/local", "/opt", "/tmp", "/var", "/var/tmp", "/home", "/Users"})
_CHUNK = 1 << 24


def local_paths(source: str | Path) -> dict[str, str]:
    """{absolute local path: what it is} that no uploaded file may name (``source``: the folder pushed)."""
    source = Path(source)
    found: dict[str, str] = {}

    def add(path: Any, what: str) -> None:
        if not path:
            return
        for variant in {str(Path(path)), str(Path(path).absolute()), os.path.realpath(path)}:
            text = variant.rstrip("/\\") or variant
            if (os.path.isabs(text) and text not in _SHARED_FOLDERS and not re.fullmatch(r"[A-Za-z]:[\\/]?", text)
                    and text not in found):
                found[text] = what

    add(source, "the folder being pushed")
    add(source.absolute().parent, "the folder holding the folder being pushed")
    add(Path(os.path.realpath(source)).parent, "the folder holding the folder being pushed")
    for folder in site.getsitepackages() if hasattr(site, "getsitepackages") else []:
        add(folder, "a site-packages folder")
    add(site.getusersitepackages(), "the user site-packages folder")
    add(sys.prefix, "the Python environment (sys.prefix)")
    add(sys.base_prefix, "the Python installation (sys.base_prefix)")
    add(str(Path.home()), "the home folder")
    return found


def _path_pattern(locals_: dict[str, str]) -> re.Pattern[bytes]:
    """A local path as a whole path: not inside a longer name or a URL, followed by a separator, a quote,
    a space, a bracket, a sentence's full stop or the end (so home ``/root`` does not match ``/rootfs``)."""
    forms = set()
    for local in locals_:
        forms.add(local.encode("utf-8"))
        forms.add(json.dumps(local)[1:-1].encode("utf-8"))  # as JSON writes it (backslashes, non-ASCII)
    alternatives = b"|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(rb"(?<![\w.~/\\:-])(?P<path>" + alternatives +
                      rb")(?=[/\\\"'`\s)\]},;<>|]|\.(?:\s|$)|$)")


def _named_local(file: Path, pattern: re.Pattern[bytes], overlap: int) -> str | None:
    """The first local path the text file ``file`` names (None for binary files and clean text)."""
    if file.suffix.lower() in BINARY_SUFFIXES:
        return None
    with open(file, "rb") as handle:
        window, first = b"", True
        while True:
            chunk = handle.read(_CHUNK)
            if b"\0" in chunk:
                return None  # binary (a null byte is never text), whatever its name
            at_end = len(chunk) < _CHUNK
            window += chunk
            for match in pattern.finditer(window):
                # Near a chunk's end the match may go on in the next chunk: decided there (the overlap).
                if (match.start() > 0 or first) and (at_end or match.end() + 2 <= len(window)):
                    return match["path"].decode("utf-8")
            if at_end:
                return None
            window, first = window[-overlap:], False


def check_tree_names_no_local_path(tree: Path, source: str | Path) -> None:
    """Refuse the push when a text file of the upload ``tree`` names a local path (:func:`local_paths`):
    the home folder, the Python environment, a site-packages folder, the folder pushed or its parent."""
    locals_ = local_paths(source)
    if not locals_:
        return
    pattern = _path_pattern(locals_)
    overlap = max(len(json.dumps(local).encode("utf-8")) for local in locals_) + 8
    forms = {json.dumps(local)[1:-1]: local for local in locals_}
    for file in sorted(path for path in tree.rglob("*") if path.is_file()):
        named = _named_local(file, pattern, overlap)
        if named is not None:
            local = forms.get(named, named)
            raise MedlamaInputError(
                f"the upload tree's file {file.relative_to(tree).as_posix()!r} names the local path {local!r} "
                f"({locals_.get(local, 'a local folder')}), which would be uploaded; remove it from that file "
                "(nothing was uploaded)", file=source)


def check_repo_id(repo_id: str) -> str:
    # huggingface_hub loads when this runs, not when medlama.publishing.upload is imported
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise MedlamaInputError(f"invalid repository id {repo_id!r}: {error}") from None
    if repo_id.count("/") != 1:
        raise MedlamaInputError(f"repository id {repo_id!r} must be <user or organisation>/<name>")
    return repo_id.split("/")[1]


def _files_of(tree: Path) -> list[dict]:
    paths = sorted((path for path in tree.rglob("*") if path.is_file()),
                   key=lambda path: path.relative_to(tree).as_posix())
    return [{"path": path.relative_to(tree).as_posix(), "size": path.stat().st_size, "sha256": sha256_of(path)}
            for path in paths]


def _check_dry_run_target(target: Path, source: Path, what: str = "the folder being published",
                          kind: str | None = None) -> None:
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and not (target / MANIFEST_NAME).is_file())):
        raise MedlamaInputError("the dry-run folder exists and is not an earlier dry run; choose a new or empty "
                                "folder (nothing was changed)", file=target)
    check_replaceable(target, marker=MANIFEST_NAME, kind=kind)  # an earlier dry run of this same command
    resolved = target.resolve()
    if resolved == source.resolve() or source.resolve() in resolved.parents or resolved in source.resolve().parents:
        raise MedlamaInputError(f"the dry-run folder must be outside {what}", file=target)


def _api(token: str | None):
    """An authenticated ``HfApi``, or a clear error before any network call."""
    # huggingface_hub loads when this runs, not when medlama.publishing.upload is imported
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        raise MedlamaInputError("the Hugging Face Hub is switched off here (HF_HUB_OFFLINE is set); unset it to "
                                "upload, or use --dry-run DIR to see the upload tree")
    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise MedlamaInputError("no Hugging Face token: set HF_TOKEN or log in with `hf auth login`")
    return HfApi(token=token)


#: The packages whose exceptions mean the Hub could not be reached or refused a request (not a bug here).
_NETWORK_PACKAGES = frozenset({"huggingface_hub", "httpx", "httpx2", "httpcore", "requests", "urllib3", "ssl"})


def _is_hub_failure(error: BaseException) -> bool:
    """Whether ``error`` says the Hub could not be reached or refused the request (a network or HTTP error)."""
    if isinstance(error, (OSError, TimeoutError)):
        return True
    return any(cls.__module__.split(".")[0] in _NETWORK_PACKAGES for cls in type(error).__mro__[:-2])


def _hub_error(error: BaseException, step: str, manifest: dict[str, Any], api, done: list[str]) -> MedlamaInputError:
    """A clear error for a Hub call that failed: the repository, the step, the cause (no token in it)."""
    cause = f"{type(error).__name__}: {error}".strip().rstrip(":")
    token = getattr(api, "token", None)
    if isinstance(token, str) and token:
        cause = cause.replace(token, "<token>")
    endpoint = getattr(api, "endpoint", None) or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    state = (f"the repository was created{' and gated' if 'gate' in done else ''} but nothing was uploaded"
             if done else "nothing was created or uploaded")
    return MedlamaInputError(
        f"could not {step} the {manifest['repo_type']} repository {manifest['repo_id']} on the Hugging Face Hub "
        f"({endpoint}): {cause}; {state}. Check the network connection, HF_ENDPOINT and the token's rights, then "
        "run the command again (or use --dry-run DIR to write the upload tree without uploading)")


def _publish(tree: Path, manifest: dict[str, Any], *, api, gated: str | None, space_sdk: str | None = None) -> None:
    """Create the repository (and branch), gate it first if asked, then upload the tree as one commit.

    A network or Hub failure at any step is a :class:`MedlamaInputError` naming the repository, the step and
    the cause (never the token), not a traceback."""
    repo_id, repo_type, revision = manifest["repo_id"], manifest["repo_type"], manifest["revision"]
    extra = {"space_sdk": space_sdk} if space_sdk else {}
    steps: list[tuple[str, str, Callable[[], Any]]] = [
        ("create", "create", lambda: api.create_repo(repo_id, repo_type=repo_type, private=manifest["private"],
                                                     exist_ok=True, **extra))]
    if gated:  # before the data lands in the repository, never after
        steps.append(("gate", "gate", lambda: api.update_repo_settings(repo_id, gated=gated, repo_type=repo_type)))
    if revision:
        steps.append(("branch", f"create the branch {revision!r} of",
                      lambda: api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)))
    steps.append(("upload", "upload to", lambda: api.upload_folder(
        repo_id=repo_id, folder_path=str(tree), repo_type=repo_type, revision=revision,
        commit_message=manifest["commit_message"])))
    done: list[str] = []
    info = None
    for name, words, call in steps:
        try:
            info = call()
        except MedlamaInputError:
            raise
        except Exception as error:
            if not _is_hub_failure(error):
                raise
            raise _hub_error(error, words, manifest, api, done) from None
        done.append(name)
    manifest["commit_url"] = getattr(info, "commit_url", None)


def finish(tree_writer, name: str, source: Path, manifest: dict[str, Any], *, kind: str, dry_run, api, token,
            gated: str | None = None, space_sdk: str | None = None,
            what: str = "the folder being published") -> dict[str, Any]:
    """Write the tree into a dry-run folder, or into a scratch folder and upload it.

    ``kind``: the command (``"push-model"``), recorded in the dry-run folder; the ownership record and the
    lock file sit outside the tree (``DIR`` itself and its parent), so neither is ever uploaded.
    """
    if dry_run is not None:
        target = Path(dry_run)
        _check_dry_run_target(target, source, what, kind)
        with atomic_directory(target, marker=MANIFEST_NAME, kind=kind) as staging:  # holds DIR's lock
            tree_writer(staging / name)
            check_tree_names_no_local_path(staging / name, source)
            manifest["files"] = _files_of(staging / name)
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return manifest
    api = api or _api(token)
    with tempfile.TemporaryDirectory(prefix="medlama-push-") as scratch:
        tree = Path(scratch) / name
        tree_writer(tree)
        check_tree_names_no_local_path(tree, source)
        manifest["files"] = _files_of(tree)
        _publish(tree, manifest, api=api, gated=gated, space_sdk=space_sdk)
    return manifest
