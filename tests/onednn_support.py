"""Making a OneDnnHandler in tests: skipped, with the reason, where oneDNN
cannot load (CI installs it on Linux x86-64, where it must load)."""

import numpy as np
import pytest


def onednn_handler(dtype=np.float32, seed=None):
    from brainstorm.handlers.onednn import OneDnnHandler, onednn_available

    ok, why = onednn_available()
    if not ok:
        pytest.skip(f'oneDNN is unavailable: {why}')
    return OneDnnHandler(dtype, seed=seed)
