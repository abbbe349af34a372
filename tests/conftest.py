"""Shared test setup: one CPU thread, and the Shakespeare corpus read once per session."""

from __future__ import annotations

import pytest
import torch

from course_utils.data import load_shakespeare

# The tiny models in these tests are far too small to gain from intra-op threads; on a busy
# 2-core machine thread hand-offs make every LayerNorm or softmax hundreds of times slower.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def shakespeare_text() -> str:
    """The full corpus (about 5 M characters), read from disk once."""
    return load_shakespeare()
