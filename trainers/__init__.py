"""Trainers that rewire encoders for probing (Contrastive-Probe)."""
