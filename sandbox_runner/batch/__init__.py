"""Batches: many tasks × perspectives, resumable, on this machine or a Ray cluster."""
