"""The MedLAMA release (github.com/cambridgeltl/medlama, pinned commit): fetch, verify, read.

Where the files come from, in order of precedence:

1. ``source`` passed by the caller (``medlama build medlama --source PATH``);
2. the environment variable ``MEDLAMA_SOURCE`` (for CI and offline users);
3. a download of the pinned commit's raw files (``BASE_URL``) by ``MedlamaBuilder`` through the
   ``datasets`` download manager into its cache, each verified against its pinned SHA-256 before it is used.

A source is a folder holding ``prompts.csv`` and ``2021AA/`` (upstream's ``data/medlama``), a folder
holding ``data/medlama/`` (a checkout of the repository), or a ``.tar.gz`` / ``.tgz`` / ``.zip``
archive of either. Local files are verified against the same checksums unless ``verify_checksums=False``;
then they are still hashed, and the files that differ or are missing are listed
(:attr:`MedlamaRelease.checksum_mismatches`, :attr:`MedlamaRelease.checksums_unchecked`) for the build report,
so that a modified copy is never recorded as the pinned release.
A data file the release does not have (``2021AA/may_cure_1000.csv``) is never read: it is reported (a
warning, and :attr:`MedlamaRelease.unexpected_files` for the build report).

Reading validates every row and stops at the first problem with an error that names the file, the
row and the field: bytes that are not UTF-8, a row with the wrong number of fields, a query (head CUI
and name) listed twice in one file, a bad value.

One module, a little over the usual length, because fetching, verifying and reading are one contract with
the pinned release: the file list, the checksums and the row rules change together when the pin does.
"""

from __future__ import annotations

import ast
import csv
import io
import os
import tarfile
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.defaults import MASK_PLACEHOLDER, SUBJECT_PLACEHOLDER

COMMIT = "8a314d11c3b8538a7ec522f668b7fbe0394caa9d"
BASE_URL = f"https://raw.githubusercontent.com/cambridgeltl/medlama/{COMMIT}/data/medlama"
RELEASE = "2021AA"
SOURCE_ENV = "MEDLAMA_SOURCE"

#: SHA-256 of every file of the release at the pinned commit, relative to ``data/medlama``.
SHA256 = {
    "2021AA/associated_morphology_of_1000.csv": "6f87d1024c4e35ecacfbec844931fa48ee4432fcc8a530e99622e50e9b24ecec",
    "2021AA/associated_morphology_of_158_hard.csv": "2e4b90d3872b4d0e1bc736e1fef3fe3c7cc2c73c1168f16ae3daf934230f48e8",
    "2021AA/disease_has_abnormal_cell_1000.csv": "88f430d67dde9cfe50857a79eb1ad19ac565312b88ac6c791743cb3ae9180496",
    "2021AA/disease_has_abnormal_cell_778_hard.csv": "f524056d4789bfc655b7618bbae41c2d4da50d5acba31ec1b6431b8a7026d4ac",
    "2021AA/disease_has_associated_anatomic_site_1000.csv": "a9dbbcf7ef8f6085846f4e785071a1544388c470d4615f196975da0ca2df2c23",
    "2021AA/disease_has_associated_anatomic_site_726_hard.csv": "ec54b83cbdb9fee375f9b96d1dca036a6d0b7895cb51ef567824ffb09cee87ce",
    "2021AA/disease_has_normal_cell_origin_1000.csv": "3ad7fc8c132ab351772220fd53b8e38324234f23cc826039c5a797180b4df4d4",
    "2021AA/disease_has_normal_cell_origin_812_hard.csv": "6351c504aa4c909bd29d054ec90badbf43f69884ca41c38938117fa081212d4f",
    "2021AA/disease_has_normal_tissue_origin_1000.csv": "4bf17d426990ac7afdce9a70edb2dffe92d4458f1e9ae6d5909040509fd7ffcb",
    "2021AA/disease_has_normal_tissue_origin_842_hard.csv": "09970ec59dd8017758744e37648dd2e73477e9c49a2dc48737630b3209786b8f",
    "2021AA/disease_mapped_to_gene_1000.csv": "104565d3981ee4183a767c78273abeee690ed71f65d318d3520402faed603bea",
    "2021AA/disease_mapped_to_gene_984_hard.csv": "c78424f3d278ccfa39f67055d400658dc255bdc8f05933a32e61055595e6af58",
    "2021AA/disease_may_have_associated_disease_1000.csv": "bde5e108544d4ba9256cd9e17093e73e20800a87e11eefafa54ee6142e5d12de",
    "2021AA/disease_may_have_associated_disease_842_hard.csv": "a82f5a6a7175c89b3469c120787bb8b6e231ed67bdad8bdbdee1555f9c6aeeb4",
    "2021AA/disease_may_have_finding_1000.csv": "5b1c2ddcc8e2232c6bdf3e67d48c51377b21da83496d81cc091812acb7863cf7",
    "2021AA/disease_may_have_finding_952_hard.csv": "f537d34590752809824cdc152af0d25acf8b6bdba1eddd7a325d5e25aa1c9f18",
    "2021AA/disease_may_have_molecular_abnormality_1000.csv": "ff24c599b3bd201fcde42b53eb45ea41e6220079f94d29b801f36abe1cac201c",
    "2021AA/disease_may_have_molecular_abnormality_989_hard.csv": "dd30baaab6e2c785023ea2bf8201c57cd3fb7f8572b392d5d1d3b405c9787314",
    "2021AA/gene_associated_with_disease_1000.csv": "f9283ce19d7e0a476be0f197363a8e70df5bfabe07174a773245ca70609598b0",
    "2021AA/gene_associated_with_disease_997_hard.csv": "966cc04b8a7af2a6e2017eb11ceb541eb63071e970e0de395cb0146863e0915e",
    "2021AA/gene_encodes_gene_product_1000.csv": "eb234f5064a98ab22a72fe556518240baa17664516f68745603aecd938c171a6",
    "2021AA/gene_encodes_gene_product_821_hard.csv": "47f87744fcda29f0b0170915ff42d6508df55b237f341fe01968691a5c8b8ee0",
    "2021AA/gene_product_encoded_by_gene_1000.csv": "783c43382c5a4e9060478332913446868e6f65205ef782f0d7b0872eed8cc8f8",
    "2021AA/gene_product_encoded_by_gene_649_hard.csv": "830d30cb8ec2b63100947c9689847f685be862cbd491a967770314f366a8a0c5",
    "2021AA/gene_product_has_associated_anatomy_1000.csv": "c71cfb0459fd9dd63d30549115579054822660ba09ce1b22697edf268af44cf4",
    "2021AA/gene_product_has_associated_anatomy_956_hard.csv": "67807b21bd712536a1a96adcf321f4d5ddf0eb4ab6e28cff29b94ce427031e42",
    "2021AA/gene_product_has_biochemical_function_1000.csv": "e99bd0727eac00e92020bbb12a9547424b6d82c4a716ad6bd993dd54d6c811c3",
    "2021AA/gene_product_has_biochemical_function_491_hard.csv": "3d7b0cdc6e8c6d2bb2f2005d3c8c3b0ef6753d056cae969a555db372ef041be6",
    "2021AA/gene_product_plays_role_in_biological_process_1000.csv": "e39f8bf6e2ad5cccb763299ba7ed30c819171e0deeaf909db97e7c5a51506811",
    "2021AA/gene_product_plays_role_in_biological_process_888_hard.csv": "4c096c1554d6b07f1136975c39919de657bcdd724fcba6773b4d2d5ed8a06779",
    "2021AA/has_physiologic_effect_1000.csv": "f84b1cbd888cfa056c9afd457d9d10678de4390a02f0eb3ac892f2a1512a2204",
    "2021AA/has_physiologic_effect_983_hard.csv": "46a8c5b1dcc408317942599fc7c9e757e0b027b8e0cf5441bc0f07ba8f2b4efe",
    "2021AA/may_prevent_1000.csv": "218c349a684a9a901aa48c15df4e2a92748c756b99a47b09b4fe15484fcbbb2a",
    "2021AA/may_prevent_861_hard.csv": "1f0caaa8467dfa5683cc88b0847f65dc84b7cf9d901edcceb6fd98f3f2ab1252",
    "2021AA/may_treat_1000.csv": "262a8b971bbdf290998406dc73b12d0fbe2615768fe1123fe63ca3e3bd578fde",
    "2021AA/may_treat_977_hard.csv": "6b2c9c9e854ff97267f073c927876c1839909cfb36b3276d7c8c824d7f109171",
    "2021AA/occurs_after_1000.csv": "223ec0c217ff298354ae721ba50be7045686448bfa9c12f0f768312e09518d21",
    "2021AA/occurs_after_623_hard.csv": "0753a668345a8d0a4e185b921e575c74049741183edfcaedcb5ef21f6c77bb89",
    "prompts.csv": "7ad58a9c5360ba2e91ececb49ef3f81c29e238f3bacc1bc2cc4988cd9cf97f05",
}

#: The 19 relations with data files (``prompts.csv`` has a 20th prompt without data).
RELATIONS = tuple(sorted(path[len(RELEASE) + 1:-len("_1000.csv")] for path in SHA256 if path.endswith("_1000.csv")))
#: The release's inverse relation pairs ``(r, r')``: (s, r, o) holds exactly when (o, r', s) does, so a fact
#: probed in both directions tells whether a model knows it both ways (``medlama consistency``). Found in the
#: full-set files of 2021AA by pairing facts by CUI: 134 facts of gene_encodes_gene_product recur reversed in
#: gene_product_encoded_by_gene, 3 of disease_mapped_to_gene in gene_associated_with_disease, and no other two
#: relations share a reversed fact. Within one relation, disease_may_have_associated_disease holds 4 reversed
#: pairs among its 1,537 facts (and associated_morphology_of, gene_encodes_gene_product and
#: gene_product_encoded_by_gene some facts with s = o): nothing declares those relations symmetric, so they are
#: not paired. The card lists these pairs (:mod:`medlama.datasets.card`).
INVERSE_PAIRS: tuple[tuple[str, str], ...] = (
    ("gene_encodes_gene_product", "gene_product_encoded_by_gene"),
    ("disease_mapped_to_gene", "gene_associated_with_disease"),
)

COLUMNS = ("head_cui", "head_name", "rel", "tail_cuis_list", "tail_names_list", "tail_names", "tail_cuis",
           "tail_cuis_len", "tail_names_len", "avg_match", "avg_rouge_l")
PROMPT_COLUMNS = ("pid", "default_prompt", "human_prompt")


@dataclass(frozen=True)
class ReleaseRow:
    """One validated row of a release file. ``row`` is 1-based over data rows (line ``row + 1``)."""

    file: str
    row: int
    relation: str
    head_cui: str
    head_name: str
    tail_cuis: tuple[str, ...]
    tail_names: tuple[str, ...]
    tail_names_raw: str
    released_avg_match: float
    released_avg_rouge_l: float

    def key(self) -> tuple:
        """Identity of a row across the full and the hard file of a relation."""
        return (self.head_cui, self.head_name, self.tail_cuis, self.tail_names)


@dataclass(frozen=True)
class Prompt:
    relation: str
    default_prompt: str
    human_prompt: str


@dataclass(frozen=True)
class MedlamaRelease:
    """A release on disk; ``verified`` when every pinned file matched its SHA-256."""

    root: Path
    verified: bool
    #: Data files found beside the release's that it does not have (relative POSIX paths), never read;
    #: the build report lists them.
    unexpected_files: tuple[str, ...] = ()
    #: Pinned files whose SHA-256 differs (only with ``verify_checksums=False``; else they stop the build).
    checksum_mismatches: tuple[str, ...] = ()
    #: Pinned files that were not there to check (only with ``verify_checksums=False``).
    checksums_unchecked: tuple[str, ...] = ()

    def full_file(self, relation: str) -> Path:
        return self.root / RELEASE / f"{relation}_1000.csv"

    def hard_file(self, relation: str) -> Path:
        matches = sorted((self.root / RELEASE).glob(f"{relation}_*_hard.csv"))
        if len(matches) != 1:
            raise MedlamaInputError(f"expected one hard file {relation}_<N>_hard.csv, found {len(matches)}",
                                    file=self.root / RELEASE)
        return matches[0]


# --------------------------------------------------------------------------- locating and fetching


def verify(root: Path) -> None:
    """Check every pinned file under ``root``: present, and with its pinned SHA-256."""
    for relative, expected in SHA256.items():
        path = root / relative
        if not path.is_file():
            raise MedlamaInputError("missing file of the MedLAMA release", file=path)
        actual = sha256_of(path)
        if actual != expected:
            raise MedlamaInputError(
                f"checksum mismatch: SHA-256 {actual}, expected {expected} (commit {COMMIT}); "
                "pass --no-verify (verify_checksums=False) to build from a modified copy on purpose", file=path)


def checksum_differences(root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(differing, absent)``: the pinned files under ``root`` whose SHA-256 is not the pinned one, and those that
    are not there. What a ``--no-verify`` build records, so that its card and results say it is not the release."""
    differing, absent = [], []
    for relative, expected in SHA256.items():
        path = root / relative
        if not path.is_file():
            absent.append(relative)
        elif sha256_of(path) != expected:
            differing.append(relative)
    return tuple(differing), tuple(absent)


def unexpected_files(root: Path) -> tuple[str, ...]:
    """Files under ``root/2021AA/`` and CSV files beside ``prompts.csv`` that the pinned release does not have
    (hidden files aside; notes such as a README beside the data are not data)."""
    found = [path for path in (root / RELEASE).rglob("*") if path.is_file()] if (root / RELEASE).is_dir() else []
    found += [path for path in root.glob("*.csv") if path.is_file()]
    relative = (path.relative_to(root).as_posix() for path in found)
    return tuple(sorted(name for name in relative
                        if name not in SHA256 and not any(part.startswith(".") for part in name.split("/"))))


def _found(root: Path, verified: bool,
           differences: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())) -> MedlamaRelease:
    """The release at ``root``, warning about files it does not have (they are not read)."""
    extra = unexpected_files(root)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        warnings.warn(f"{root}: {len(extra)} file(s) that the MedLAMA release (commit {COMMIT[:12]}) does not have "
                      f"are left out: {shown}", stacklevel=3)
    return MedlamaRelease(root, verified=verified, unexpected_files=extra, checksum_mismatches=differences[0],
                          checksums_unchecked=differences[1])


def _release_root(folder: Path) -> Path | None:
    for candidate in (folder, folder / "data" / "medlama"):
        if (candidate / "prompts.csv").is_file() or (candidate / RELEASE).is_dir():
            return candidate
    children = [child for child in folder.iterdir() if child.is_dir()] if folder.is_dir() else []
    if len(children) == 1:  # an archive's single top folder, e.g. medlama-<commit>/
        return _release_root(children[0])
    return None


def extract_archive(archive: Path, into: Path) -> None:
    """Unpack a .tar.gz/.tgz/.tar/.zip safely (no paths outside ``into``), with clear errors."""
    name = archive.name.lower()
    try:
        if name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(archive) as tar:
                tar.extractall(into, filter="data")
        elif name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(into)
        else:
            raise MedlamaInputError("not a folder, .tar.gz, .tgz, .tar or .zip archive", file=archive)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as error:
        raise MedlamaInputError(f"cannot read archive (truncated or corrupt?): {error}", file=archive) from error


@contextmanager
def open_release(source: str | Path | None = None, *, verify_checksums: bool = True) -> Iterator[MedlamaRelease]:
    """Yield the local release found at ``source`` (or ``$MEDLAMA_SOURCE``), verified (``verify_checksums=False``:
    the files that differ from the pinned ones are listed instead, and ``verified`` says whether there are any).

    The pinned download is ``medlama.datasets.medlama.MedlamaBuilder``'s, through the ``datasets``
    download manager and its cache.
    """
    source = source or os.environ.get(SOURCE_ENV)
    if source is None:
        raise MedlamaInputError(f"no local MedLAMA release: pass a source or set ${SOURCE_ENV}")
    path = Path(source).expanduser()
    if not path.exists():
        raise MedlamaInputError("MedLAMA source not found", file=path)
    with tempfile.TemporaryDirectory(prefix="medlama-src-") as scratch:
        if path.is_file():
            extract_archive(path, Path(scratch))
            searched = Path(scratch)
        else:
            searched = path
        root = _release_root(searched)
        if root is None:
            raise MedlamaInputError("no MedLAMA release here: expected prompts.csv and 2021AA/ "
                                    "(or data/medlama/ holding them)", file=path)
        if verify_checksums:
            verify(root)
            yield _found(root, verified=True)
        else:  # still hashed (a few MB): a modified copy must be recorded as one, not as the pinned release
            differences = checksum_differences(root)
            yield _found(root, verified=not any(differences), differences=differences)


# --------------------------------------------------------------------------- reading


def _decode(path: Path) -> str:
    """The file's text; bytes that are not UTF-8 are an error naming the row and the byte offset."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[:error.start].decode("utf-8")  # valid up to the bad byte
        records = sum(1 for _ in csv.reader(io.StringIO(before)))  # the header and the rows begun so far
        record = records + 1 if not before or before.endswith("\n") else records
        line = before.count("\n") + 1
        where = dict(row=record - 1) if record > 1 else dict(field="header")
        raise MedlamaInputError(f"not UTF-8: byte 0x{data[error.start]:02x} at byte offset {error.start} (line "
                                f"{line}); the release files are UTF-8", file=path, **where) from None


def _read_csv(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise MedlamaInputError("missing file of the MedLAMA release", file=path)
    with io.StringIO(_decode(path), newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [column for column in columns if column not in header]
        if missing:
            extra = [column for column in header if column not in columns]
            hint = f"; unexpected column(s) {extra} (renamed?)" if extra else ""
            raise MedlamaInputError(f"missing column(s) {missing}{hint}", file=path)
        for row_number, record in enumerate(reader, start=1):
            if None in record or any(record[column] is None for column in columns):
                raise MedlamaInputError("wrong number of fields", file=path, row=row_number)
            yield row_number, record


def _literal_list(text: str, path: Path, row: int, field: str) -> tuple[str, ...]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as error:
        raise MedlamaInputError(f"not a Python list literal ({error.__class__.__name__}): {text[:80]!r}",
                                file=path, row=row, field=field) from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MedlamaInputError(f"expected a list of strings, got {text[:80]!r}", file=path, row=row, field=field)
    if not value:
        raise MedlamaInputError("empty answer list", file=path, row=row, field=field)
    if any(not item.strip() for item in value):
        raise MedlamaInputError(f"blank answer in {text[:80]!r}", file=path, row=row, field=field)
    return tuple(value)


def _split_joined(text: str, path: Path, row: int, field: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in text.split("||"))
    if not any(parts):
        raise MedlamaInputError("empty answer list", file=path, row=row, field=field)
    if not all(parts):
        raise MedlamaInputError(f"blank answer in {text[:80]!r}", file=path, row=row, field=field)
    return parts


def _number(text: str, kind: type, path: Path, row: int, field: str):
    try:
        return kind(text)
    except ValueError:
        raise MedlamaInputError(f"expected {kind.__name__}, got {text!r}", file=path, row=row, field=field) from None


def read_relation_file(path: Path, relation: str) -> list[ReleaseRow]:
    """Read and validate one ``<relation>_*.csv`` file of the release."""
    rows, seen = [], {}
    for number, record in _read_csv(path, COLUMNS):
        query = (record["head_cui"], record["head_name"])
        if query in seen:
            raise MedlamaInputError(f"duplicate query: head {record['head_cui']} {record['head_name']!r} is also row "
                                    f"{seen[query]} (rows {seen[query]} and {number} of this file ask the same "
                                    "question)", file=path, row=number, field="head_cui")
        seen[query] = number
        if record["rel"] != relation:
            raise MedlamaInputError(f"relation {record['rel']!r} in a file of {relation!r}", file=path, row=number,
                                    field="rel")
        if not record["head_name"].strip():
            raise MedlamaInputError("empty head name", file=path, row=number, field="head_name")
        # The answers are the joined columns: the release de-duplicates them (order kept) and counts
        # them in *_len; the *_list literals may repeat an answer (770 rows) and are only checked.
        names = _split_joined(record["tail_names"], path, number, "tail_names")
        cuis = _split_joined(record["tail_cuis"], path, number, "tail_cuis")
        listed = _literal_list(record["tail_names_list"], path, number, "tail_names_list")
        _literal_list(record["tail_cuis_list"], path, number, "tail_cuis_list")
        if list(dict.fromkeys(name.strip() for name in listed)) != list(names):
            raise MedlamaInputError("tail_names does not list the same answers as tail_names_list", file=path,
                                    row=number, field="tail_names")
        if len(names) != len(cuis):
            raise MedlamaInputError(f"{len(names)} answer names but {len(cuis)} answer CUIs", file=path,
                                    row=number, field="tail_cuis")
        for field, expected in (("tail_names_len", len(names)), ("tail_cuis_len", len(cuis))):
            declared = _number(record[field], int, path, number, field)
            if declared != expected:
                raise MedlamaInputError(f"{field} is {declared} but the row lists {expected} answer(s)", file=path,
                                        row=number, field=field)
        rows.append(ReleaseRow(
            file=str(path), row=number, relation=relation, head_cui=record["head_cui"],
            head_name=record["head_name"], tail_cuis=cuis, tail_names=names, tail_names_raw=record["tail_names"],
            released_avg_match=_number(record["avg_match"], float, path, number, "avg_match"),
            released_avg_rouge_l=_number(record["avg_rouge_l"], float, path, number, "avg_rouge_l"),
        ))
    if not rows:
        raise MedlamaInputError("no data rows", file=path)
    return rows


def read_prompts(path: Path) -> dict[str, Prompt]:
    """Read ``prompts.csv``; every prompt must hold exactly one ``[X]`` and one ``[Y]``."""
    prompts = {}
    for number, record in _read_csv(path, PROMPT_COLUMNS):
        for field in ("default_prompt", "human_prompt"):
            for slot in (SUBJECT_PLACEHOLDER, MASK_PLACEHOLDER):
                count = record[field].count(slot)
                if count != 1:
                    raise MedlamaInputError(f"prompt {record[field]!r} has {count} {slot} slot(s), needs exactly one",
                                            file=path, row=number, field=field)
        prompts[record["pid"]] = Prompt(record["pid"], record["default_prompt"], record["human_prompt"])
    return prompts
