"""The BioLAMA release (Sung et al., EMNLP 2021): fetch, verify, read.

The authors distribute BioLAMA as one archive, ``data.tar.gz`` (about 85 MB, a Google Drive file linked
from github.com/dmis-lab/BioLAMA). Where it comes from, in order of precedence:

1. ``source`` passed by the caller (``medlama build biolama --source PATH``);
2. the environment variable ``BIOLAMA_SOURCE``;
3. a download of the pinned URL by ``BiolamaBuilder`` through the ``datasets`` download manager into its
   cache, verified against a SHA-256 before it is extracted.

**The authors publish no digest of the archive, so none is pinned** (``ARCHIVE_SHA256 is None``): the
README of github.com/dmis-lab/BioLAMA, at every commit up to ``28eabf5`` (2022-03-17, the Drive link of
this release), gives the links and the size (about 85 MB), no SHA-256 or MD5, and no issue of the repository
gives one. The download therefore refuses to proceed unless it is given a hash to check against (``sha256=``
/ ``--sha256 HASH`` / ``$BIOLAMA_SHA256``) or told explicitly to accept the file unchecked
(``verify_checksums=False`` / ``--no-verify``). Whatever the input, a build records the SHA-256 of the archive
it read (``archive_sha256``) and where the hash it was checked against came from (``digest_source``:
:data:`DIGEST_SOURCES`): ``supplied`` when nothing published or given could check it, the digest of the
archive the user supplied, recorded so that another build can be compared with it. Verification is never
skipped silently: build_info.json and the dataset card say which.

A source is the archive (``.tar.gz`` / ``.tgz`` / ``.tar`` / ``.zip``) or an extracted folder: the
``data/`` folder itself (holding ``ctd/``, ``umls/``, ``wikidata/``) or a folder holding ``data/``. A local
archive is checked against the hash when one is known (given, ``$BIOLAMA_SHA256`` or pinned); an extracted
folder cannot be (there are no per-file hashes) and is read as unverified.

Reading validates every record and stops at the first problem with an error that names the file, the
line (reported as ``row``, 1-based) and the field.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.loaders.medlama_release import extract_archive
from medlama.core.defaults import MASK_PLACEHOLDER, SUBJECT_PLACEHOLDER

#: Google Drive id of ``data.tar.gz``, from the README of github.com/dmis-lab/BioLAMA.
DRIVE_ID = "1CcjpmNuAXavL3aMjwVqiiziMu3OGDyyG"
#: Direct-download form of the Drive link (``confirm=t`` skips the "cannot scan for viruses" page).
URL = f"https://drive.usercontent.google.com/download?id={DRIVE_ID}&export=download&confirm=t"
#: SHA-256 of ``data.tar.gz`` as its authors publish it: ``None``, since they publish none (module docstring);
#: the download then needs ``--sha256 HASH`` (or ``$BIOLAMA_SHA256``) or an explicit ``--no-verify``, and a
#: local archive is built with its own digest recorded (``digest_source`` ``supplied``).
ARCHIVE_SHA256: str | None = None
#: Where the hash a build's archive was checked against came from, as build_info.json's ``digest_source``
#: records it: ``pinned`` (:data:`ARCHIVE_SHA256`, published), ``given`` (``--sha256``), ``environment``
#: (``$BIOLAMA_SHA256``); or, checked against nothing, ``supplied`` (the digest of the local archive the user
#: supplied) and ``downloaded`` (of a download taken with ``--no-verify``). An extracted folder has none (``None``).
DIGEST_SOURCES = ("pinned", "given", "environment", "supplied", "downloaded")

SOURCES = ("ctd", "umls", "wikidata")
SPLITS = ("train", "dev", "test")
PROMPT_FILE = "prompts/manual.jsonl"
SOURCE_ENV = "BIOLAMA_SOURCE"
SHA256_ENV = "BIOLAMA_SHA256"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Record:
    """One validated line of ``triples_processed/<PID>/<split>.jsonl``; ``line`` is 1-based."""

    file: str
    line: int
    source: str
    relation: str
    uuid: str
    sub_uri: str
    sub_label: str
    sub_type: str
    sub_aliases: tuple[str, ...]
    obj_uris: tuple[str, ...]
    obj_labels: tuple[str, ...]
    obj_types: tuple[str, ...]
    obj_aliases: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Prompt:
    relation: str
    template: str


@dataclass(frozen=True)
class BiolamaRelease:
    """A release on disk: ``root`` is the ``data/`` folder holding one folder per source."""

    root: Path
    verified: bool
    archive_sha256: str | None
    origin: str
    #: How the input was checked, in words (for the build report and the dataset card; no local paths).
    verification: str = ""
    #: Where the hash ``archive_sha256`` was checked against came from (:data:`DIGEST_SOURCES`; None: a folder).
    digest_source: str | None = None

    def source_dir(self, source: str) -> Path:
        return self.root / source

    def relations(self, source: str) -> list[str]:
        """The relation ids (``triples_processed/`` subfolders) of ``source``, in natural order."""
        folder = self.source_dir(source) / "triples_processed"
        if not folder.is_dir():
            raise MedlamaInputError(f"no triples_processed/ folder for source {source!r}", file=folder)
        found = sorted((child.name for child in folder.iterdir() if child.is_dir() and not child.name.startswith(".")),
                       key=natural_key)
        if not found:
            raise MedlamaInputError("no relation folders", file=folder)
        return found

    def split_file(self, source: str, relation: str, split: str) -> Path:
        return self.source_dir(source) / "triples_processed" / relation / f"{split}.jsonl"

    def prompt_file(self, source: str) -> Path:
        return self.source_dir(source) / PROMPT_FILE


def natural_key(name: str) -> tuple:
    """``UR44`` before ``UR116``: digits compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


# --------------------------------------------------------------------------- locating, fetching, verifying


def _expected(sha256: str | None) -> tuple[str | None, str | None]:
    """The first hash set, in order (given, ``$BIOLAMA_SHA256``, the pinned one), and where it comes from."""
    return next(((value, source) for value, source in ((sha256, "given"), (os.environ.get(SHA256_ENV), "environment"),
                                                       (ARCHIVE_SHA256, "pinned")) if value), (None, None))


def expected_sha256(sha256: str | None = None) -> str | None:
    """The hash to check the archive against: given, else ``$BIOLAMA_SHA256``, else the pinned one."""
    value = _expected(sha256)[0]
    if value is None:
        return None
    value = value.strip().lower()
    if not _HEX64.match(value):
        raise MedlamaInputError(f"not a SHA-256 (64 hex digits): {value!r}")
    return value


def expected_source(sha256: str | None = None) -> str | None:
    """Where :func:`expected_sha256`'s hash comes from: ``given``, ``environment`` or ``pinned`` (None: none)."""
    return _expected(sha256)[1]


def _is_data_root(folder: Path) -> bool:
    return any((folder / source / "triples_processed").is_dir() for source in SOURCES)


def find_data_root(folder: Path) -> Path | None:
    """The ``data/`` folder at or below ``folder`` (itself, ``data/``, or inside a single top folder)."""
    for candidate in (folder, folder / "data"):
        if candidate.is_dir() and _is_data_root(candidate):
            return candidate
    children = [child for child in folder.iterdir() if child.is_dir() and not child.name.startswith(".")] \
        if folder.is_dir() else []
    if len(children) == 1:
        return find_data_root(children[0])
    return None


@contextmanager
def open_release(source: str | Path | None = None, *, sha256: str | None = None,
                 verify_checksums: bool = True) -> Iterator[BiolamaRelease]:
    """Yield the local release found at ``source`` (or ``$BIOLAMA_SOURCE``), checked as described above.

    The download of ``URL`` is ``medlama.datasets.biolama.BiolamaBuilder``'s, through the ``datasets``
    download manager and its cache.
    """
    source = source or os.environ.get(SOURCE_ENV)
    if source is None:
        raise MedlamaInputError(f"no local BioLAMA release: pass a source or set ${SOURCE_ENV}")
    with tempfile.TemporaryDirectory(prefix="biolama-src-") as scratch:
        path = Path(source).expanduser()
        if not path.exists():
            raise MedlamaInputError("BioLAMA source not found", file=path)
        origin = str(path)
        if path.is_file():
            expected = expected_sha256(sha256) if verify_checksums else None
            digest = sha256_of(path)
            if expected is not None and digest != expected:
                raise MedlamaInputError(f"checksum mismatch: SHA-256 {digest}, expected {expected}; pass "
                                        "--no-verify to build from a modified copy on purpose", file=path)
            extract_archive(path, Path(scratch))
            searched, verified = Path(scratch), expected is not None
            digest_source = expected_source(sha256) if verified else "supplied"
            verification = (f"local archive, SHA-256 {digest} checked against the expected hash" if verified else
                            f"local archive, SHA-256 {digest} not checked (--no-verify); the supplied archive's "
                            "digest is recorded" if not verify_checksums else
                            f"local archive, SHA-256 {digest} not checked: no trusted hash pinned or given (the "
                            "authors publish none); the supplied archive's digest is recorded")
        else:
            if sha256:
                raise MedlamaInputError("--sha256 checks an archive; an extracted folder has no checksum "
                                        "(pass data.tar.gz itself)", file=path)
            searched, verified, digest, digest_source = path, False, None, None
            verification = "an extracted folder, which has no checksum to check"
        root = find_data_root(searched)
        if root is None:
            raise MedlamaInputError("no BioLAMA release here: expected data/{ctd,umls,wikidata}/triples_processed/ "
                                    "(the layout of data.tar.gz)", file=source)
        yield BiolamaRelease(root=root, verified=verified, archive_sha256=digest, origin=origin,
                             verification=verification, digest_source=digest_source)


# --------------------------------------------------------------------------- reading


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    if not path.is_file():
        raise MedlamaInputError("missing file of the BioLAMA release", file=path)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise MedlamaInputError(f"not a JSON object ({error.msg}): {line.strip()[:80]!r}", file=path,
                                        row=number) from None
            if not isinstance(record, dict):
                raise MedlamaInputError(f"not a JSON object: {line.strip()[:80]!r}", file=path, row=number)
            yield number, record


def read_prompts(path: Path) -> dict[str, Prompt]:
    """Read ``prompts/manual.jsonl``: ``relation`` and ``template`` per line, one ``[X]`` and one ``[Y]`` each."""
    prompts: dict[str, Prompt] = {}
    for number, record in _json_lines(path):
        for field in ("relation", "template"):
            if not isinstance(record.get(field), str) or not record[field].strip():
                raise MedlamaInputError("missing or empty", file=path, row=number, field=field)
        template = record["template"]
        for slot in (SUBJECT_PLACEHOLDER, MASK_PLACEHOLDER):
            count = template.count(slot)
            if count != 1:
                raise MedlamaInputError(f"template {template!r} has {count} {slot} slot(s), needs exactly one",
                                        file=path, row=number, field="template")
        if record["relation"] in prompts:
            raise MedlamaInputError(f"second prompt for relation {record['relation']!r}", file=path, row=number,
                                    field="relation")
        prompts[record["relation"]] = Prompt(record["relation"], template)
    return prompts


def _string(record: dict, field: str, path: Path, row: int, *, required: bool = True, blank_ok: bool = False) -> str:
    if field not in record or record[field] is None:
        if required:
            raise MedlamaInputError("missing", file=path, row=row, field=field)
        return ""
    value = record[field]
    if not isinstance(value, str):
        raise MedlamaInputError(f"expected a string, got {value!r}"[:120], file=path, row=row, field=field)
    if not blank_ok and not value.strip():
        raise MedlamaInputError("empty", file=path, row=row, field=field)
    return value


def _strings(record: dict, field: str, path: Path, row: int, *, required: bool = True) -> tuple[str, ...]:
    if field not in record or record[field] is None:
        if required:
            raise MedlamaInputError("missing", file=path, row=row, field=field)
        return ()
    value = record[field]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MedlamaInputError(f"expected a list of strings, got {value!r}"[:160], file=path, row=row, field=field)
    return tuple(value)


def read_split(path: Path, source: str, relation: str) -> list[Record]:
    """Read and validate one ``<split>.jsonl`` of a relation.

    Required per record: ``uuid``, ``predicate_id`` (equal to the folder's relation), ``sub_uri``,
    ``sub_label``, ``obj_uris`` and ``obj_labels`` (same length, at least one object, no blank label).
    ``sub_type``, ``sub_aliases``, ``obj_types`` and ``obj_aliases`` may be missing (empty); ``obj_aliases``,
    when not empty, has one list per object.
    """
    records, seen = [], {}
    for number, record in _json_lines(path):
        uuid = _string(record, "uuid", path, number)
        predicate = _string(record, "predicate_id", path, number)
        if predicate != relation:
            raise MedlamaInputError(f"predicate_id {predicate!r} in a file of relation {relation!r}", file=path,
                                    row=number, field="predicate_id")
        if uuid in seen:
            raise MedlamaInputError(f"uuid {uuid!r} also on line {seen[uuid]}", file=path, row=number, field="uuid")
        seen[uuid] = number
        labels = _strings(record, "obj_labels", path, number)
        uris = _strings(record, "obj_uris", path, number)
        if not labels:
            raise MedlamaInputError("no gold object", file=path, row=number, field="obj_labels")
        if any(not label.strip() for label in labels):
            raise MedlamaInputError(f"blank label in {list(labels)!r}"[:160], file=path, row=number, field="obj_labels")
        if len(uris) != len(labels):
            raise MedlamaInputError(f"{len(uris)} object URIs for {len(labels)} object labels", file=path, row=number,
                                    field="obj_uris")
        raw_aliases = record.get("obj_aliases")
        if raw_aliases is None or raw_aliases == []:
            aliases: tuple[tuple[str, ...], ...] = tuple(() for _ in labels)
        else:
            if not isinstance(raw_aliases, list) or not all(
                    isinstance(group, list) and all(isinstance(item, str) for item in group) for group in raw_aliases):
                raise MedlamaInputError(f"expected a list of lists of strings, got {raw_aliases!r}"[:160], file=path,
                                        row=number, field="obj_aliases")
            if len(raw_aliases) != len(labels):
                raise MedlamaInputError(f"{len(raw_aliases)} alias lists for {len(labels)} object labels "
                                        "(obj_aliases[i] belongs to obj_labels[i])", file=path, row=number,
                                        field="obj_aliases")
            aliases = tuple(tuple(group) for group in raw_aliases)
        records.append(Record(
            file=str(path), line=number, source=source, relation=relation, uuid=uuid,
            sub_uri=_string(record, "sub_uri", path, number),
            sub_label=_string(record, "sub_label", path, number),
            sub_type=_string(record, "sub_type", path, number, required=False, blank_ok=True),
            sub_aliases=_strings(record, "sub_aliases", path, number, required=False),
            obj_uris=uris, obj_labels=labels,
            obj_types=_strings(record, "obj_types", path, number, required=False),
            obj_aliases=aliases,
        ))
    return records
