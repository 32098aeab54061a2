"""Simulation: the rollout engine and trainer model, length sampling, baselines, the benchmark, the bound."""
