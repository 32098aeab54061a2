"""Integrations with training frameworks: export, observe, replay iterators and the verl sampler."""
