"""Dataset folders that share a name and a card but not their rows: what ``datasets`` 5.2's cache mixes up when
they are loaded with ``load_dataset(DIR, config)``, and what medlama's own loaders must tell apart."""

from __future__ import annotations

from pathlib import Path

CARD = """---
configs:
- config_name: hard
  default: true
  data_files:
  - split: test
    path: data/hard/*.parquet
- config_name: pools
  data_files: pools.parquet
---
"""


def medlama_named_folder(root: Path, ids: list[str]) -> Path:
    """``root/medlama`` with the same card as every other one made here, and its own query rows ``ids``
    (written again in place when called again)."""
    from datasets import Dataset

    folder = root / "medlama"
    (folder / "data" / "hard").mkdir(parents=True, exist_ok=True)
    Dataset.from_dict({"id": ids, "relation": ["r"] * len(ids)}).to_parquet(
        str(folder / "data" / "hard" / "rows.parquet"))
    Dataset.from_dict({"name": ["x"]}).to_parquet(str(folder / "pools.parquet"))
    (folder / "README.md").write_text(CARD)
    return folder
