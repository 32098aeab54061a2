"""Comparing arrangements: today's baselines, the side-by-side comparison, the benchmark workloads, and the twin
of `asp simulate`."""
