"""Readers of raw releases and corpora: they verify, validate and yield records; builders shape them."""
