"""Dataset card templates, shipped with the package so installed builders can render them."""

from pathlib import Path

CARDS_DIR = Path(__file__).resolve().parent


def card_path(name: str) -> Path:
    """Path of ``dataset_cards/<name>.md``."""
    return CARDS_DIR / f"{name}.md"
