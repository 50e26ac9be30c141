import json
import os
import types

calls = []  # each _record_memory_history call's keyword arguments, in order


def current_device():
    return 0


def _record_memory_history(enabled="all", **kwargs):
    calls.append({"enabled": enabled, **kwargs})


def _snapshot():
    with open(os.environ["FAKE_TORCH_SNAPSHOT"]) as f:
        return json.load(f)


memory = types.SimpleNamespace(_record_memory_history=_record_memory_history, _snapshot=_snapshot)
