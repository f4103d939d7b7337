"""Counting a prober's shards as a probe ranks them, and killing or failing one, as a resume test needs."""

from __future__ import annotations

from pathlib import Path

from medlama.core.resume import work_folder


class RankCalls:
    """Counts ``cls.rank_scored`` calls (one per shard); the ``stop_at``-th raises ``error`` (a kill,
    ``KeyboardInterrupt``, unless told otherwise). Each counter counts its own run only."""

    def __init__(self, monkeypatch, cls, stop_at: int | None = None,
                 error: BaseException | type[BaseException] = KeyboardInterrupt) -> None:
        self.count, self.stop_at = 0, stop_at
        rank = getattr(cls.rank_scored, "unpatched", cls.rank_scored)

        def counted(prober, queries, top_k=10, **options):
            self.count += 1
            if self.count == self.stop_at:
                raise error
            return rank(prober, queries, top_k=top_k, **options)

        counted.unpatched = rank
        monkeypatch.setattr(cls, "rank_scored", counted)


def shard_files(out: Path) -> list[Path]:
    """The shards a probe into ``out`` has kept beside it so far."""
    return sorted((work_folder(out) / "shards").glob("*.jsonl"))
