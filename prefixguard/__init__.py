"""prefixguard: find, explain and price prompt-cache breaks in LLM requests.

The repository keeps `engine/` and `rules/` at its top; installed, they are `prefixguard.engine` and
`prefixguard.rules` (pyproject.toml, package-dir). Run from a checkout that is not installed (or one
installed before that layout), this finder gives them the same names, so code imports one name either way.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from typing import Any

_CHECKOUT = Path(__file__).resolve().parent.parent
_BESIDE = {"prefixguard.engine": "engine", "prefixguard.rules": "rules"}


class _CheckoutFinder:  # a meta path finder (importlib.abc would import ~20 ms of importlib.resources)
    """prefixguard.engine -> <checkout>/engine, prefixguard.rules -> <checkout>/rules; last resort."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname not in _BESIDE:
            return None
        return PathFinder.find_spec(fullname, [str(_CHECKOUT)])


if (
    (_CHECKOUT / "pyproject.toml").is_file()
    and (_CHECKOUT / "rules" / "catalog.toml").is_file()
    and not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path)
):
    sys.meta_path.append(_CheckoutFinder())
