"""Experiments: one module per paper (its tables and figures) and ``compare`` (all engines side by side).

Today only ``compare`` exists (used by ``gpusm demo``); the per-paper modules arrive with their
engines (the experiments-harness issue).
"""
