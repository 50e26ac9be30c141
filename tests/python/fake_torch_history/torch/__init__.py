"""A stand-in for torch with allocation history: `cuda.memory._record_memory_history` records how it was
called, and `cuda.memory._snapshot()` answers the snapshot in $FAKE_TORCH_SNAPSHOT (JSON, as PyTorch's
snapshot with history reads once dumped). Only what cumemaudit.capture_profile calls."""
from . import cuda  # noqa: F401
