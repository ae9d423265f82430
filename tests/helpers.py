"""Shared test helpers (imported by test modules; not a test module itself)."""

from pathlib import Path

import numpy as np
import pandas as pd

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def sachs_discrete() -> pd.DataFrame:
    """The FedC2SL paper's discrete Sachs data (853 x 11, levels 0..2)."""
    return pd.read_csv(SHARED_DATA / "sachs" / "sachs_discrete_853.txt", sep=r"\s+")


def padded_names(p: int) -> list[str]:
    """Names whose string order equals index order (causal-learn sorts some node lists by name)."""
    return [f"X{i:03d}" for i in range(p)]


def codes_of(df: pd.DataFrame) -> np.ndarray:
    return df.to_numpy(dtype=np.int64)
