"""Shared test helpers (imported by test modules; not a test module itself)."""

import numpy as np
import pandas as pd


def padded_names(p: int) -> list[str]:
    """Names whose string order equals index order (causal-learn sorts some node lists by name)."""
    return [f"X{i:03d}" for i in range(p)]


def codes_of(df: pd.DataFrame) -> np.ndarray:
    return df.to_numpy(dtype=np.int64)
