"""Arranging a schedule: packing, interleaving, the scheduler's own timeline, and `asp schedule`'s twin."""
