"""StepBuilder.add_ops gives each operation the step assign_ops_to_steps gives (hand example)."""

import numpy as np
import pandas as pd

from nsysdoc.metrics.steps import StepBuilder, assign_ops_to_steps
from nsysdoc.trace import schema as S


def _gtid(pid: int, tid: int) -> int:
    return (pid << 24) | tid


def test_add_ops_returns_the_step_of_each_operation_and_extends_steps():
    # process 7: its step thread has steps [0, 100) and [100, 200); another thread one range [0, 50)
    # (not primary: fewer steps); process 9 did no CUDA work (proc -1)
    main, other = _gtid(7, 7), _gtid(7, 8)
    ranges = pd.DataFrame({"global_tid": [main, main, other, _gtid(9, 9)], "name": ["s0", "s1", "x", "y"],
                           "start_ns": [0, 100, 0, 0], "range_end_ns": [100, 200, 50, 10]})
    keys = np.array([_gtid(7, 0) & S.PROCESS_MASK])
    b = StepBuilder(ranges, keys)
    proc = np.array([0, 0, 0, 0, 0])
    when = np.array([5, 99, 100, 200, -1])   # in s0, in s0, in s1 (half-open), after, before
    end = np.array([30, 180, 250, 300, 4])
    got = b.add_ops(proc, when, end)
    want = assign_ops_to_steps(b.steps, proc, when)
    assert got.tolist() == want.tolist()
    step_of = dict(zip(b.df["name"], b.df["step"]))
    assert got.tolist() == [step_of["s0"], step_of["s0"], step_of["s1"], -1, -1]
    steps = b.finish(0, 300)
    t = steps.table.to_pandas().set_index("name")
    # steps partition their thread's timeline: s0's GPU work runs to 180 but s0 ends where s1
    # starts (100); s1, the thread's last step, is extended to the end of its op (250)
    assert t.loc["s0", "end_ns"] == 100 and t.loc["s1", "end_ns"] == 250
    assert t.loc["s0", "step_time_ns"] == 100 and t.loc["s1", "step_time_ns"] == 150
