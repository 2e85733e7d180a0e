"""nsys's ``shortName`` of a demangled kernel name, computed from the name alone.

An nsys export carries ``shortName`` as a column; a PyTorch Profiler trace has only the demangled
signature, so its reader computes it (:mod:`nsysdoc.trace.kineto.mapping`), and the page shows it
for the kernel cells of the evidence tables (``views/columns.py``, through ``metrics.kernels``).
A pure string function, in no reader: the page may read it without importing one.
"""
from __future__ import annotations


def short_kernel_name(name: str) -> str:
    """nsys's ``shortName`` of a demangled kernel name: the function's own name, without return
    type, namespaces, template arguments and parameters (``void at::native::(anonymous
    namespace)::multi_tensor_apply_kernel<...>(...)`` -> ``multi_tensor_apply_kernel``)."""
    s = name.strip()
    out = []
    angle = 0
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "(" and angle == 0:
            if s.startswith("(anonymous namespace)", i):
                out.append("(anonymous namespace)")
                i += len("(anonymous namespace)")
                continue
            break  # the parameter list
        if ch == "<":
            angle += 1
        elif ch == ">":
            angle = max(0, angle - 1)
        elif angle == 0:
            out.append(ch)
        i += 1
    base = "".join(out).strip()
    base = base.replace("(anonymous namespace)", "anonymous_namespace")
    base = base.split()[-1] if base.split() else ""
    short = base.split("::")[-1]
    return short or name
