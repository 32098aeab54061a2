"""Reading the trainer's settings from the part of verl's config a plug-in is given.

verl hands a dataset class or a sampler only ``config.data``; an OmegaConf node still knows the whole config it
belongs to, so the plug-ins read the trainer's own settings (the agent-loop worker count, which trainer
runs) from there instead of asking the user to repeat them. Plain mappings have no root: every lookup is
then None. Nothing here imports verl; OmegaConf is imported only for an OmegaConf config.
"""

from __future__ import annotations

from typing import Any


def trainer_setting(config: Any, key: str) -> Any:
    """``key`` (dotted, from the config's root, e.g. ``trainer.use_v1``) or None when unknown."""
    try:
        root = config._get_root()
    except Exception:  # noqa: BLE001 - a plain mapping, or a detached copy
        return None
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(root, key, default=None)
    except Exception:  # noqa: BLE001 - not an OmegaConf config after all
        return None
