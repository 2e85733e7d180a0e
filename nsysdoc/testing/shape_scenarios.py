"""Scenarios of issue 47, item 2: operators' input shapes (``record_shapes=True``) across steps.

Each function returns a :class:`~nsysdoc.testing.Capture` of a situation users meet (not the
tool's output); tests compute the expected numbers by hand from the arguments, the builder's
timing model (header of ``tests/test_judgement_scenarios.py``) and ``docs/glossary.md``
("Operators by input shape", "Input shapes across steps"). The operators carry their input
shapes: Kineto ``Input Dims``, nsys ``sizes = [...]`` (``--pytorch=autograd-shapes-nvtx``).
"""
from __future__ import annotations

from typing import Callable

from .builder import Capture

#: a cuDNN forward convolution kernel (the algorithm cuDNN's heuristics pick without benchmark mode)
CONV_KERNEL = ("void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>"
               "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, "
               "int, float, float, int, float const*, float const*, bool, int, int)")
RELU_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>>"
               "(int, at::native::threshold_kernel_impl<float>, at::detail::Array<char *, 3>)")


def conv_shapes_per_step(steps: int = 5, odd_step: int | None = 3, batch: int = 32, odd_batch: int = 17,
                         conv_us: float = 20_000.0, odd_conv_us: float = 35_000.0, first_conv_us: float | None = None,
                         relu_us: float = 200.0, record_shapes: bool = True) -> Capture:
    """A convolution layer per step: ``ProfilerStep#i`` holds ``aten::conv2d`` (input
    ``[batch, 3, 224, 224]``, weight ``[64, 3, 7, 7]``; a ``conv_us`` cuDNN kernel), then
    ``aten::relu`` (``[batch, 64, 112, 112]``; a ``relu_us`` kernel), then ``loss.item()``. In step
    ``odd_step`` (None: none) the batch is ``odd_batch`` and the convolution kernel takes
    ``odd_conv_us`` (cuDNN meets a new shape: another algorithm, or its search again). ``first_conv_us``:
    the first step's convolution takes that long with the usual shapes (warm-up). Without
    ``record_shapes`` the operators carry no shapes."""
    cap = Capture()
    t = cap.process(pid=4710).thread()
    for i in range(steps):
        b = odd_batch if i == odd_step else batch
        k = odd_conv_us if i == odd_step else (first_conv_us if i == 0 and first_conv_us is not None else conv_us)
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::conv2d", shapes=[[b, 3, 224, 224], [64, 3, 7, 7]] if record_shapes else None):
                t.launch(CONV_KERNEL, k)
            with t.op("aten::relu", shapes=[[b, 64, 112, 112]] if record_shapes else None):
                t.launch(RELU_KERNEL, relu_us)
            t.item()
    return cap


SHAPE_SCENARIOS: dict[str, Callable[..., Capture]] = {f.__name__: f for f in (conv_shapes_per_step,)}
