"""What a resumed run must share with the run it continues, said once for every command that resumes
(``rewire``'s checkpoints, ``probe``'s and ``ucm``'s shards): :func:`setting_differences` lists each setting
whose value differs, as ``name: <then> then, <now> now``, so the refusal names what changed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["flatten", "setting_differences"]


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``: nested records compared setting by setting."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def setting_differences(then: Mapping[str, Any], now: Mapping[str, Any], keys: Iterable[str] | None = None
                        ) -> list[str]:
    """``"name: <then> then, <now> now"`` for each setting (of ``keys``, or of either record, nested records
    compared key by key) whose value differs between the earlier run's record ``then`` and this run's ``now``."""
    if keys is None:
        then, now = flatten(then), flatten(now)
        keys = sorted({*then, *now})
    return [f"{key}: {then.get(key)!r} then, {now.get(key)!r} now" for key in keys if then.get(key) != now.get(key)]
