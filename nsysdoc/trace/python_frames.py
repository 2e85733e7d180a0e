"""Python frames as the PyTorch profiler names them, and which of them are the user's own code.

The Kineto reader keeps the user's frames while it parses (the stacks of operators), the metrics
name a launch's module with them afterwards: the rule lives here, below both."""
from __future__ import annotations

import re

# Python frames, as Kineto names them: "torch/nn/modules/module.py(1743): _call_impl",
# "train.py(184): <module>", "<built-in method conv2d of type object at 0x...>", "nn.Module: Linear_0"
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\):\s*(?P<func>.*)$")
_LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python", "/usr/lib/", "<frozen", "<string>",
                  "importlib/", "/python3.", "\\lib\\", "threading.py", "runpy.py", "contextlib.py", "functools.py")
_LIBRARY_PREFIXES = ("torch/", "torch\\", "<built-in", "<method", "<frozen", "nn.Module:", "numpy/", "apex/",
                     "triton/", "transformers/", "accelerate/", "deepspeed/", "torchvision/", "lightning/",
                     "pytorch_lightning/", "fairscale/", "megatron/core/", "typing.py", "abc.py", "enum.py",
                     "logging/", "asyncio/", "concurrent/", "multiprocessing/", "selectors.py", "queue.py")


def is_user_frame(name: str) -> bool:
    """A Python frame of the user's code: a file-and-line frame outside torch, other libraries the
    profiler reports relative to site-packages, and the standard library."""
    n = name.strip()
    if not _FRAME.match(n):
        return False
    f = n.replace("\\", "/")
    if f.startswith(_LIBRARY_PREFIXES):
        return False
    return not any(p in f for p in _LIBRARY_PARTS)
