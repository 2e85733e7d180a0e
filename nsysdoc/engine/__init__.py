"""The analysis engine: every metric of a capture in passes over time slices, in bounded memory.

A capture's tables live in blocks (:mod:`nsysdoc.trace.store`). The engine never asks for a whole
table:

1. :mod:`.plan` reads the NVTX table once (step markers, DataLoader and set-up ranges) and the GPU
   tables' time and launch columns once (step ends, each step's device, the GPU span, the
   launches that are set-up work), then cuts the timeline into **slices** of at most
   :data:`nsysdoc.engine.plan.SLICE_ROWS` rows, equal but for the first and the last, half as long
   (nothing runs beside the first one's reading, and the last runs alone).
2. :mod:`.slices` runs each slice in time order: the GPU operations that start in it (plus those
   still running from earlier slices), the host rows around it, the device unions, the idle gaps
   that *end* in it (each gap exactly once, classified with the host rows of its whole extent), and
   the slice's share of every window, step and device total (positional quantities clipped to the
   slice, counts by start). What a slice hands on to the next one is small: per device the time
   its GPU last went idle, the operations still running, scalar-read checks still waiting for the
   thread's next call.
3. Attribution (which operator, module and line each launch comes from) follows the slices too:
   each slice reads the NVTX operator ranges around its launches (:mod:`.attribute_sliced`; the
   PyTorch Profiler's traces keep one whole-capture forest, :mod:`.attribute`).
4. What has to stay per row is kept compact: kernel durations and name ids (exact per-name
   medians and p95), launch API and queue times, the durations of the gaps the gap-shape values
   take medians of.

Every number is the one a single pass over whole tables gives (``tests/test_engine_slices.py``
runs every fixture scenario with slices of a few operations and compares the full JSON).
"""
