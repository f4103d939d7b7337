"""Builders that turn probing benchmarks into Hugging Face dataset folders (Parquet + card)."""
