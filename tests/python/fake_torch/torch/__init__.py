"""A stand-in for torch with only what cumemaudit.torch_step reads, so the helper's PyTorch figures are
tested without PyTorch (fixed numbers the test can expect exactly)."""
from . import cuda  # noqa: F401
