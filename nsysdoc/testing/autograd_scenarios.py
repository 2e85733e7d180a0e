"""Scenarios of work launched by autograd's engine thread (issue 46, item 9): which operator a
backward kernel belongs to when the thread that launches it is not the one with the ranges.
Numbers in tests/test_judgement3_backward.py are computed by hand from these durations."""
from __future__ import annotations

from .builder import Capture

#: FP32 GEMM kernels (cuBLAS SIMT names): forward, backward of a node with ranges, backward without
SGEMM_FWD = "volta_sgemm_128x64_nn"
SGEMM_BWD = "volta_sgemm_128x64_nt"
SGEMM_BWD_BARE = "volta_sgemm_64x64_tn"


def backward_on_autograd_thread(steps: int = 2, fwd_us: float = 300.0, bwd_us: float = 400.0,
                                bare_us: float = 200.0, orphan_us: float = 0.0,
                                other_process_us: float = 0.0) -> Capture:
    """Per step, on the main thread (pid 4242): the user's NVTX range ``Forward`` > ``aten::linear``
    (seq 7 + 10 i) > ``aten::addmm`` (same seq) launching a ``fwd_us`` FP32 GEMM; then the user's
    range ``Backward``, in which the main thread waits (``cudaDeviceSynchronize``) while autograd's
    engine thread (tid 4243) runs the backward pass: ``autograd::engine::evaluate_function:
    AddmmBackward0`` > ``AddmmBackward0`` (seq 7 + 10 i) > ``aten::mm`` launching a ``bwd_us`` FP32
    GEMM (ranges as ``--pytorch=autograd-nvtx`` writes them), then a ``bare_us`` FP32 GEMM launched
    outside every range of that thread (a backward node nothing recorded: a capture with the user's
    NVTX ranges only has all its backward work so).

    Launches that must keep ``(no operator)``, when their time is given: ``orphan_us``, a kernel the
    main thread launches after ``Backward`` under its step marker only (its own launch, outside its
    ranges); ``other_process_us``, a kernel (stream 9) that a second process (pid 5151, recording no
    range) launches from its thread 5152 inside the first process's ``Backward`` range, right after
    the bare GEMM's launch (never attributed across processes)."""
    cap = Capture()
    p = cap.process(pid=4242)
    main = p.thread()
    bwd = p.thread(tid=4243, name="autograd")
    other = cap.process(pid=5151).thread(tid=5152, name="worker") if other_process_us else None
    for i in range(steps):
        seq = 7 + 10 * i
        with main.range(f"ProfilerStep#{i}"):
            with main.range("Forward"), main.op("aten::linear", seq=seq):
                main.cpu(us=10)
                with main.op("aten::addmm", seq=seq):
                    main.launch(SGEMM_FWD, us=fwd_us)
            main.cpu(us=20)
            with main.range("Backward"):
                main.cpu(us=5)
                bwd.at(main.now_ns)
                with bwd.op("autograd::engine::evaluate_function: AddmmBackward0", seq=seq, backward=True), \
                        bwd.op("AddmmBackward0", seq=seq, backward=True), bwd.op("aten::mm"):
                    bwd.launch(SGEMM_BWD, us=bwd_us)
                bwd.cpu(us=5)
                bwd.launch(SGEMM_BWD_BARE, us=bare_us)
                if other is not None:
                    other.at(bwd.now_ns)
                    other.launch("other_process_kernel", us=other_process_us, stream=9)
                    bwd.at(other.now_ns)
                main.at(bwd.now_ns)
                main.sync_device()
            if orphan_us:
                main.launch("orphan_kernel", us=orphan_us)
            main.cpu(us=100)
    return cap
