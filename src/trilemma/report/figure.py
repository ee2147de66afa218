"""matplotlib for the plotting commands (`fit --plot`, `solve --plot`, `ladder --plot`): imported on
first use only (the planner never imports it), with the Agg backend; a missing install or an unwritable
path is an InputError on the ``plot`` field. Images are written atomically (``trilemma.fileio``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from trilemma.errors import InputError
from trilemma.fileio import write_bytes_atomic

__all__ = ["pyplot", "save_figure"]

INSTALL = "matplotlib installed (pip install 'trilemma[plot]')"


def pyplot(path: str | Path) -> Any:
    """``matplotlib.pyplot`` on the Agg backend, else an InputError naming the plot ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plot", str(path), INSTALL) from None
    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` and close it; an unwritable path is an InputError."""
    import matplotlib.pyplot as plt

    p = Path(path)
    buf = io.BytesIO()
    try:  # drawn in memory, then written atomically: a failed write leaves the old image
        fig.savefig(buf, dpi=dpi, format=p.suffix[1:].lower() or None)
    except ValueError as exc:  # a format matplotlib does not write
        raise InputError("plot", str(path), f"an image path ({exc})") from None
    finally:
        plt.close(fig)
    write_bytes_atomic(p, buf.getvalue(), "plot")
    return p
