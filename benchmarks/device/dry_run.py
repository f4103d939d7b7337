"""The GPU measurement's dry run here, on the CPU at tiny sizes, through ``measure.py``'s own path.

1. The carried set (``.whl``, fetched by ``prepare.py`` for Python 3.12, manylinux x86-64) installs with
   ``pip install --no-index --no-deps --target`` for that Python and platform: every file is a wheel pip takes
   there.
2. The same pins are fetched for this Python into ``.whl-dry/`` (pure-Python wheels are the same files; a
   compiled one is its twin for this interpreter) and ``measure.py --cpu-dry-run`` runs every step with them in
   a site shaped like the GPU image: a new virtual environment holding, from this machine's environment, only
   the packages of ``image.txt`` and what they require here (this machine's versions; ``DRY_ONLY`` adds what
   only a CPU run needs). A module the wheels lack fails its step here as it would there.

    python benchmarks/device/dry_run.py [--out /tmp/medlama-dry-run] [--steps causal-gpt2,masked]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prepare import (DEVICE_PYTHON, HERE, PLATFORMS, ROOT, PrepError, fetch, read_image,  # noqa: E402
                     read_pins)

#: Packages a CPU run needs that the GPU run does not (not carried): the retrieval prober searches with FAISS
#: on a CPU, with torch on a GPU.
DRY_ONLY = ("faiss-cpu",)


def image_closure(image: set[str]) -> set[str]:
    """The image's packages installed here, with what they require here (unconditionally), by name."""
    dists = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}
    wanted: set[str] = set()
    todo = [name for name in image if name in dists]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for text in dists[name].requires or []:
            req = Requirement(text)
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and canonicalize_name(req.name) in dists:
                todo.append(canonicalize_name(req.name))
    return wanted


def shaped_site(folder: Path, names: set[str]) -> Path:
    """A new virtual environment whose site-packages links ``names``' files from this environment; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next(folder.glob("lib/python*/site-packages"))
    for dist in metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) not in names:
            continue
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source, link = Path(dist.locate_file(top)), site / top
            if source.exists() and not link.exists():
                link.symlink_to(source)
    return folder / "bin" / "python"


def installs_for_device(wheels: Path) -> None:
    """Install the carried wheels for the GPU machine's Python and platform into a scratch folder."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    with tempfile.TemporaryDirectory() as target:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                               "--only-binary=:all:", "--python-version", DEVICE_PYTHON, "--implementation", "cp",
                               *platforms, "--target", target, *map(str, sorted(wheels.glob("*.whl")))],
                              capture_output=True, text=True)
    if done.returncode:
        raise PrepError(f"the carried wheels do not install for Python {DEVICE_PYTHON}: {done.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dry_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "medlama-dry-run")
    parser.add_argument("--steps", default=None, help="measure.py's --steps (default: all)")
    args = parser.parse_args(argv)
    try:
        installs_for_device(ROOT / ".whl")
        print(f"the carried wheels install for Python {DEVICE_PYTHON} (manylinux x86_64)")
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        fetch(read_pins(HERE / "wheels.txt"), ROOT / ".whl-dry", python=here)
    except PrepError as error:
        print(f"dry_run: error: {error}", file=sys.stderr)
        return 2
    image = set(read_image(HERE / "image.txt"))
    with tempfile.TemporaryDirectory(prefix="medlama-shaped-") as folder:
        python = shaped_site(Path(folder) / "env", image_closure(image) | set(DRY_ONLY))
        command = [str(python), str(HERE / "measure.py"), "--cpu-dry-run", "--python", str(python), "--wheels",
                   str(ROOT / ".whl-dry"), "--out", str(args.out)] + (["--steps", args.steps] if args.steps else [])
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
