"""A Hugging Face Hub id (``org/name``) to the ``config.json`` this machine already holds, offline.

The local cache is read with ``huggingface_hub``'s own cache API (``try_to_load_from_cache``: the
``models--org--name/refs/<revision>`` pointer, then ``snapshots/<commit>/config.json``), never the
network: nothing here downloads, and ``try_to_load_from_cache`` opens no connection. The cache
folder is resolved at each call from the environment, as ``huggingface_hub`` resolves it at import:
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub``. ``huggingface_hub`` is the optional ``hub`` extra; without it the
refusal says so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trilemma.errors import InputError

__all__ = ["HUB_ID", "cached_config", "hub_cache_dir"]

#: an ``org/name`` Hub repository id (letters, digits, ``-``, ``_``, ``.``; no leading dot)
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def hub_cache_dir() -> Path:
    """The Hub cache folder as ``huggingface_hub`` would resolve it from the environment now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def cached_config(repo_id: str, revision: str = "main") -> Path:
    """The cached ``config.json`` of ``repo_id`` at ``revision``; InputError naming the cache folder
    and how to pass a path when the cache has none (or ``huggingface_hub`` is not installed)."""
    cache = hub_cache_dir()
    how = (
        f"a shipped preset (`trilemma presets models` lists them and their Hub ids) or a Hub id "
        f"whose config.json is in the local Hugging Face cache ({cache}: none for this id); "
        "or pass the config.json itself, e.g. -m path/to/config.json"
    )
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise InputError(
            "model",
            repo_id,
            how + " (reading the cache needs the hub extra: pip install 'trilemma[hub]')",
        ) from None
    found = try_to_load_from_cache(
        repo_id, "config.json", cache_dir=str(cache), revision=revision, repo_type="model"
    )
    if not isinstance(found, str):  # None, or the cache's marker of a file known to be absent
        raise InputError("model", repo_id, how)
    return Path(found)
