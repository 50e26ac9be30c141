"""A capture window that runs out of memory, under cumemaudit.capture_profile (with the stand-in torch of
fake_torch_history): the profile must still be printed and written, and the error reach the program."""
import json
import sys

import cumemaudit
import torch

try:
    with cumemaudit.capture_profile(sys.argv[1]):
        raise MemoryError("CUDA out of memory (stand-in)")
except MemoryError as e:
    print("raised:", e)
print("history calls:", json.dumps(torch.cuda.calls))
