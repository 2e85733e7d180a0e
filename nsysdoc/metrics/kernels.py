"""Kernel statistics, overall and per name.

Definitions (``docs/glossary.md``): a kernel's **duration** is end − start on the GPU. Statistics
cover kernels that start inside the analysis window. **Share of kernel time** of a name = its
summed duration over the summed duration of all kernels (a share of kernel time, not of wall
time — concurrent kernels are both counted). Median and p95 are exact, linear interpolation.
**Share under 10 µs** = fraction of kernels (by count) shorter than 10 µs. A **communication
kernel** is an NCCL/RCCL/MSCCL kernel (``trace.schema.NCCL_KERNEL``) or a collective kernel of
another library (:data:`OTHER_COLLECTIVE`); the **top compute kernel** is the name with the most
kernel time that is not one (:func:`top_compute_kernel`).
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..trace.columns import Columns
from ..trace.kernel_names import short_kernel_name  # noqa: F401 - the page's short kernel names
from ..trace.model import StringTable

TINY_KERNEL_NS = 10_000

#: Collective kernels of libraries other than NCCL/RCCL/MSCCL (whose names ``trace.schema.NCCL_KERNEL``
#: flags): PyTorch symmetric-memory ``one_shot_all_reduce``/``multimem_all_reduce``, vLLM's custom
#: ``cross_device_reduce_1stage``, all-gather/reduce-scatter/all-to-all kernels of other libraries,
#: NVSHMEM kernels. Their time is spent waiting on other ranks as much as computing, so their own
#: efficiency never "sets the time" of the GPU work.
OTHER_COLLECTIVE = re.compile(r"(?<![a-z])(?:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
                              r"cross_device_reduce)|nvshmem", re.IGNORECASE)


def is_communication_kernel(name, is_nccl: bool = False) -> bool:
    """Whether a kernel (by name, and the reader's NCCL flag) is a communication kernel."""
    return bool(is_nccl) or (isinstance(name, str) and OTHER_COLLECTIVE.search(name) is not None)


def top_compute_kernel(rows) -> dict | None:
    """The first row of a per-name table sorted by total time (``kernels_by_name`` records) that is
    not a communication kernel, or None (no rows, or only communication kernels among them)."""
    for r in rows or ():
        if not is_communication_kernel(r.get("name"), r.get("is_nccl", False)):
            return r
    return None

# --- GEMM/convolution precision from the kernel name ---------------------------------------------
# A name heuristic (glossary: fp32_gemm_ms). The name is first cut to the kernel's own qualified name
# ("head": template arguments, parameter lists and lambdas removed, return type dropped), so that a
# template argument such as ``CUDAFunctor_add<float>`` or a parameter type ``cublasSplitKParams`` never
# makes a kernel a GEMM. Generic wrappers (``cutlass::Kernel<X>``, ``cutlass::device_kernel<X>``,
# ``gemvx::kernel<...>``) and attention kernels are judged on their template arguments too.

#: GEMM / convolution markers (searched in the head, and in the wrapped kernel's name for wrappers).
#: ``fbgemm`` (embedding ops) is not a GEMM; ``convert`` is not a convolution; ``_mm_`` tokens are
#: Triton/Inductor matmul templates (``triton_tem_fused_mm_0``).
GEMM_LIKE = re.compile(r"(?<!fb)gemm|conv(?!ert)|matmul|dgrad|wgrad|fprop|bprop|xmma|nvjet|tensorop|wmma|hmma|"
                       r"imma|simt|[shi]cudnn|\d{3,6}cudnn|winograd|(?:^|_)(?:b|add|baddb)?mm(?:_|\d|$)",
                       re.IGNORECASE)
#: Attention kernels built on matrix multiplies (FlashAttention, CUTLASS/xformers FMHA).
ATTENTION = re.compile(r"flash|fmha", re.IGNORECASE)
#: GEMM-named helpers that do no GEMM/convolution math tensor cores could speed up: matrix-vector
#: products (cuBLAS gemv*, K=1 gemmk1), im2col/col2im-style unfolds, split-K reductions, cuDNN offset
#: precomputation, layout conversions, FFT and Winograd transforms, depthwise/grouped direct
#: convolutions (memory-bound CUDA-core kernels), Inductor pointwise/reduction kernels named after an
#: ``addmm`` they follow, flash-attention split-KV combine / backward pre-processing kernels.
NOT_GEMM = re.compile(r"gemv|gemmk1|im2col|col2im|vol2col|col2vol|split_?k_?reduce|reduce_?split_?k|reduction::|"
                      r"reduce_1block|offsets|nchw_?to_?nhwc|nhwc_?to_?nchw|convert|transpose|depthwise|"
                      r"grouped_direct|fft|winograd\w*?(?:data|filter|output|delta|tiles|transform)|scalepacked|"
                      r"combine|dot_do_o|^triton_(?:poi|red|per)_", re.IGNORECASE)
#: Tensor-core instruction markers: CUTLASS "tensorop", HMMA/IMMA/DMMA/WGMMA/GMMA/UMMA, cuDNN xmma
#: MMA shapes ("tensor16x8x8"), Hopper warp-group tiles, MMA-shape kernels ("s1688gemm", "h884gemm",
#: "i8816gemm", "s16816cudnn"), cuBLAS nvjet (Hopper/Blackwell), flash attention.
TC_INSTR = re.compile(r"tensorop|hmma|imma|dmma|gmma|umma|(?<![a-z])mma|tensor\d+x\d+x\d+|warpgroupsize|"
                      r"(?<![a-z0-9])[a-z]?\d{3,6}(?:gemm|cudnn|fprop|dgrad|wgrad)|nvjet|flash", re.IGNORECASE)
#: Architecture-tuned families that are tensor-core kernels unless marked FFMA/SIMT.
TC_FAMILY = re.compile(r"xmma|cutlass|nvjet|(?<![a-z0-9])sm\d{2,3}_", re.IGNORECASE)
#: CUDA-core (SIMT) math markers: FFMA, SIMT CUTLASS, cuBLAS s/h/d/c/z-gemm, cuDNN s/h/i-cudnn, dp4a.
SIMT = re.compile(r"ffma|simt|(?<![a-z0-9])[shdcz]gemm|_[shdcz]gemm|[shi]cudnn|int8x4|dp4a", re.IGNORECASE)
#: FP32 SIMT math, definite.
FP32_STRONG = re.compile(r"ffma|sgemm|simt|scudnn", re.IGNORECASE)
#: FP32 data without a SIMT marker: FP32 SIMT outside tensor-core families, TF32 with an MMA marker,
#: undecided (None) in a tensor-core family without one.
FP32_WEAK = re.compile(r"(?<![a-z0-9])(?:f32|fp32|float)(?![0-9])", re.IGNORECASE)
#: Reduced-precision / other-precision markers, checked in this order (input type before output type).
REDUCED_OR_TC = (
    ("complex", re.compile(r"(?<![a-z0-9])[cz]\d{0,6}gemm|_[cz]\d{0,6}gemm|complex|float2|double2|cucomplex",
                           re.IGNORECASE)),
    ("fp64", re.compile(r"f64|fp64|(?<![a-z0-9])d\d{0,6}gemm|_d\d{0,6}gemm|dmma|double", re.IGNORECASE)),
    ("fp8", re.compile(r"e4m3|e5m2|fp8|(?<![a-z0-9])f8|qgmma|ue8m0|e2m1|fp4|nvf4|mxf[468]", re.IGNORECASE)),
    ("int8", re.compile(r"int8|int4|imma|(?<![a-z0-9])[isu]8(?![0-9])|(?<![a-z0-9])i\d{3,6}(?:gemm|cudnn|fprop|dgrad|"
                        r"wgrad)|icudnn|signed char", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32|tfloat32", re.IGNORECASE)),
    ("fp16", re.compile(r"fp16|(?<![a-z0-9])f16|float16|half|(?<![a-z0-9])h\d{3,6}(?:gemm|cudnn|fprop|dgrad|wgrad)|"
                        r"hgemm|hcudnn|hmma", re.IGNORECASE)),
    # FP32 data through 16x8x8 tensor-core MMAs (Ampere+; FP16 names say fp16/f16, checked above)
    ("tf32", re.compile(r"(?<![a-z0-9])s1688(?:gemm|cudnn|fprop|dgrad|wgrad)|tensor16x8x8", re.IGNORECASE)),
    ("fp32-simt", FP32_STRONG),
)
#: cuBLAS "nvjet" kernels (Hopper/Blackwell, ``nvjet_[smNN_]<types>_<tile>...``): the first type
#: letter is the A/B input type (observed: tst = BF16 in/out with FP32 accumulate, hsh/hss = FP16,
#: qqtst = FP8, sss_tf32 = FP32 data through TF32). All are tensor-core kernels.
NVJET = re.compile(r"nvjet_(?:sm\d+_)?([a-z]+)_", re.IGNORECASE)
_NVJET_TYPE = {"q": "fp8", "o": "fp8", "e": "fp8", "t": "bf16", "h": "fp16", "d": "fp64", "c": "complex",
               "z": "complex", "i": "int8"}
#: First element type among template arguments (legacy kernels: ``gemmSN_TN_kernel<float, ...>``).
ARG_TYPE = re.compile(r"(?<![a-z0-9_])(float2|double2|float|double|__half|half_t|half|__nv_bfloat16|bfloat16_t|"
                      r"bfloat16|__bfloat|int8_t|signed char|__nv_fp8_e4m3|__nv_fp8_e5m2)(?![a-z0-9_])",
                      re.IGNORECASE)
_ARG_PRECISION = {"float2": "complex", "double2": "complex", "float": "fp32-simt", "double": "fp64",
                  "int8_t": "int8", "signed char": "int8"}
_BRACKETS = re.compile(r"[<>()\[\]{}]")
_WRAPPER_LAST = re.compile(r"kernel\d*|device_kernel", re.IGNORECASE)


def _split_name(name: str) -> tuple[str, str]:
    """(head, template arguments of the head): ``void ns::f<float, 4>(int, T2)`` → (``ns::f``, ``float, 4``).
    ``(anonymous namespace)``/``<unnamed>`` scopes are dropped; the return type is dropped."""
    depth, pos, opener, top = 0, 0, "", []
    args = ""
    for m in _BRACKETS.finditer(name):
        ch, i = m.group(), m.start()
        if depth == 0:
            top.append(name[pos:i])
            if ch == "(":
                so_far = "".join(top)
                if so_far.strip() and not so_far[-1].isspace() and not so_far.endswith("::"):
                    break  # the parameter list (a scope such as "(anonymous namespace)::" follows "::" or a space)
            opener, pos = ch, i + 1
        if ch in "<([{":
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                if opener == "<":
                    args = name[pos:i]
                pos = i + 1
    else:
        if depth == 0:
            top.append(name[pos:])
    text = "".join(top).strip()
    head = text.rsplit(None, 1)[-1] if text else ""
    return head, args


@lru_cache(maxsize=16384)
def _classify(name: str) -> tuple[str | None, bool]:
    """(gemm_precision, uses_tensor_cores) of a kernel name."""
    head, args = _split_name(name)
    last = head.rsplit("::", 1)[-1]
    attention = bool(ATTENTION.search(head))
    wrapper = bool(_WRAPPER_LAST.fullmatch(last)) or "cutlass" in head.lower()
    # the kernel's identity: its head, plus the wrapped kernel's name for wrappers
    ident = head + " " + re.split(r"[<,(]", args, 1)[0] if wrapper else head
    if NOT_GEMM.search(ident) or not (attention or GEMM_LIKE.search(ident)):
        return None, False
    text = head + " " + args if (wrapper or attention) else head
    precision = None
    nv = NVJET.search(text)
    if nv:
        code = nv.group(1).lower()
        precision = "tf32" if "tf32" in text.lower() else _NVJET_TYPE.get(code[0])
    else:
        for label, rx in REDUCED_OR_TC:
            if rx.search(text):
                precision = label
                break
        if precision is None:
            weak = FP32_WEAK.search(text)
            if not weak and not (wrapper or attention) and args:
                t = ARG_TYPE.search(args)  # legacy kernels: the first template argument type
                if t:
                    precision = _ARG_PRECISION.get(t.group(1).lower())
                    if precision is None:
                        precision = next((lbl for lbl, rx in REDUCED_OR_TC if rx.search(t.group(1))), None)
                    weak = precision == "fp32-simt"
                    precision = None if weak else precision
            if weak:
                if TC_INSTR.search(text):
                    precision = "tf32"
                elif not (TC_FAMILY.search(text) or attention):
                    precision = "fp32-simt"
    if precision == "fp32-simt":
        return precision, False
    if SIMT.search(text) and not nv:
        tc = False
    elif TC_INSTR.search(text) or (TC_FAMILY.search(text) and precision is not None):
        tc = True
    else:
        tc = precision in ("tf32", "bf16", "fp16", "fp8")
    return precision, tc


def gemm_precision(name: str) -> str | None:
    """Math precision of a GEMM/convolution (or attention) kernel from its name: "fp32-simt" (FP32 on
    CUDA cores: what TF32/AMP would speed up), "tf32", "bf16", "fp16", "fp8" (FP8 or narrower),
    "int8", "fp64", "complex"; None when the kernel is not a GEMM/conv (gemv, im2col, split-K
    reduce, layout transforms, FFT/Winograd transforms, depthwise conv, elementwise...) or the name
    does not tell (Triton matmuls, ``cutlass::Kernel`` short names)."""
    return _classify(name)[0]


def is_fp32_gemm(name: str) -> bool:
    """GEMM/conv kernel running FP32 math without tensor cores (name heuristic, see glossary).

    ``sm80_xmma_gemm_f32f32_..._ffma_...`` is FP32 (FFMA) although it is an "xmma" kernel;
    ``sm80_xmma_gemm_tf32f32_...`` and ``..._bf16...`` are not. Equals ``gemm_precision(name) == "fp32-simt"``.
    """
    return _classify(name)[0] == "fp32-simt"


def uses_tensor_cores(name: str) -> bool:
    """GEMM/conv/attention kernel whose name says it runs on tensor cores (MMA marker, tensor-core
    family without an FFMA/SIMT marker, or TF32/BF16/FP16/FP8 math). Never true for other kernels."""
    return _classify(name)[1]


# --- names users can tell apart -------------------------------------------------------------------
# The kernel table groups kernels by a display name (glossary: "Kernel names"): nsys's shortName,
# except where that short name is a library's generic entry point, the same for every kernel the
# library launches; such kernels are named from their demangled name's template argument instead.

#: Generic short names (the whole short name): CUTLASS's ``cutlass::Kernel``/``Kernel2``/
#: ``device_kernel`` (every CUTLASS 2/3 GEMM, convolution, FlashAttention-3 kernel), cuBLAS's
#: ``gemvx::kernel`` and cuBLASLt's ``epilogue::impl::globalKernel``, Thrust's ``_kernel_agent`` and
#: CUB's ``static_kernel``; a Triton kernel called ``kernel`` has no template argument and keeps it.
GENERIC_SHORT = re.compile(r"(?:[Kk]ernel|device_kernel|global_?[Kk]ernel|_kernel_agent|static_kernel)\d*")
#: The longest display name; longer ones are cut and end with "…".
DISPLAY_NAME_MAX = 160
#: Demangled names longer than this keep their generic short name (bounds the work per name).
_DISPLAY_SOURCE_MAX = 1 << 16
#: Wrapper templates looked through for the kernel's own type (FlashAttention-3's
#: ``flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>``).
_PASS_THROUGH = re.compile(r"enable_sm\w*")
#: Type names that say nothing of the kernel (a first template argument such as ``int`` or ``4``).
_UNINFORMATIVE = re.compile(r"(?:unsigned |signed )?(?:int|long|short|char|bool|float|double|size_t|void|true|"
                            r"false|const|volatile|[0-9][0-9a-zA-Z]*|u?int\d+_t)")
#: Names of the kernel's own type that need their scope (``__fill::functor``).
_GENERIC_TYPE = re.compile(r"functor|Params|type|impl|Kernel\d*|kernel\d*|Op|Operator")
#: Element types (first one in the argument; CUTLASS, CUDA, c10 and plain C++ spellings).
_ELEMENT = re.compile(r"(?<![\w])(bfloat16_t|half_t|tfloat32_t|float_e4m3_t|float_e5m2_t|float_e2m1_t|"
                      r"float_e2m3_t|float_e3m2_t|float_ue8m0_t|float_ue4m3_t|int4b_t|uint4b_t|__nv_bfloat16|"
                      r"__nv_fp8_e4m3|__nv_fp8_e5m2|__half|BFloat16|Half|Float8_e4m3fn|Float8_e5m2|complex<float>|"
                      r"complex<double>|double|float|int8_t|uint8_t|signed char|unsigned char)(?![\w])")
#: Tile shapes: CUTLASS 2 ``GemmShape<128, 128, 32>``, CuTe ``tuple<C<128>, C<128>, C<64>>`` (after
#: namespaces are dropped); the first whose largest side is at least 16 (CuTe cluster shapes such as
#: 2x1x1 come before the tile).
_SHAPE = re.compile(r"GemmShape<(\d{1,5}), (\d{1,5}), (\d{1,5})>|tuple<C<(\d{1,5})>, C<(\d{1,5})>(?:, C<(\d{1,5})>)?>")
#: Words of main-loop / schedule / math-instruction type names (CUTLASS).
_SCHEDULE_WORDS = ("WarpSpecialized", "Multistage", "Pipelined", "Pingpong", "Cooperative")
_MATH_WORDS = ("TensorOp", "Simt", "Wmma")
_SCOPE = re.compile(r"\(anonymous namespace\)::|<unnamed>::|\b[A-Za-z_]\w*::")
_INT_PARAM = re.compile(r"\((?:unsigned |signed )?(?:int|long|bool|char|short)\)|"
                        r"\b(?:unsigned |signed )?(?:int|long|bool|char|short)=")
_SPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"[A-Za-z_]\w*")


def _top_args(args: str) -> list[str]:
    """The top-level comma-separated parts of a template argument list."""
    parts, depth, start = [], 0, 0
    for m in re.finditer(r"[<>()\[\]{},]", args):
        ch = m.group()
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(args[start:m.start()])
            start = m.end()
    parts.append(args[start:])
    return [p.strip() for p in parts]


def _compact(text: str) -> str:
    """``text`` with namespaces, nsys's ``int=``/``(int)`` spellings and runs of white space removed."""
    text = _SCOPE.sub("", _INT_PARAM.sub("", _SPACE.sub(" ", text)))
    return re.sub(r" ?([<>,]) ?", lambda m: ", " if m.group(1) == "," else m.group(1), text)


def _identity(args: str) -> str:
    """A readable identity of a generic kernel from its template arguments (``""``: none found)."""
    first = _top_args(args)[0]
    for _ in range(8):  # look through wrapper templates
        first = re.sub(r"^(?:(?:const|volatile|struct|class|typename)\s+)+", "", first)
        head, inner = _split_name(first)
        last = head.rsplit("::", 1)[-1]
        if inner and _PASS_THROUGH.fullmatch(last):
            first = _top_args(inner)[0]
            continue
        break
    if not last or _UNINFORMATIVE.fullmatch(last) or not _TOKEN.fullmatch(last):
        return _compact(args)  # numbers and built-in types: the argument list itself
    scope = [c for c in head.split("::")[:-1] if c and "anonymous" not in c and c != "<unnamed>"]
    core = f"{scope[-1]}::{last}" if scope and _GENERIC_TYPE.fullmatch(last) else last
    if not inner:
        return core
    text = _compact(inner)
    details = []
    elem = _ELEMENT.search(text)
    if elem:
        details.append(elem.group(1))
    for m in _SHAPE.finditer(text):
        dims = [int(d) for d in m.groups() if d is not None]
        if max(dims) >= 16:
            details.append("x".join(map(str, dims)))
            break
    tokens = _TOKEN.findall(text)
    math = next((t for t in tokens if any(w in t for w in _MATH_WORDS)), None)
    sched = [t for t in tokens if any(w in t for w in _SCHEDULE_WORDS)]
    sched = next((t for t in sched if t.startswith("Kernel")), sched[0] if sched else None)
    details += [t for t in (math, sched) if t and t not in details]
    if not details:  # nothing of the above: the name of the template's own first type argument
        h, _ = _split_name(re.sub(r"^(?:(?:const|volatile|struct|class|typename)\s+)+", "", _top_args(inner)[0]))
        parts = [c for c in h.split("::") if c and "anonymous" not in c and c != "<unnamed>"]
        if parts and _TOKEN.fullmatch(parts[-1]) and not _UNINFORMATIVE.fullmatch(parts[-1]):
            details.append("::".join(parts[-2:]) if len(parts) > 1 and _GENERIC_TYPE.fullmatch(parts[-1])
                           else parts[-1])
    return " ".join([core, *details])


def display_name(short: str, demangled: str) -> str:
    """The name a kernel is shown and grouped under: ``short`` (nsys's shortName), unless it is
    generic (:data:`GENERIC_SHORT`) and the demangled name has template arguments; then
    ``[namespace::]short<identity>``, where the identity is the first template argument's own type
    name (looking through ``enable_sm90_or_later``-style wrappers) plus, for a template, its first
    element type, tile shape, math and schedule type names (``cutlass::device_kernel<GemmUniversal
    bfloat16_t 128x128x64 KernelTmaWarpSpecializedCooperative>``); for built-in or numeric first
    arguments the argument list without namespaces (``gemvx::kernel<int, int, float, …>``).
    At most :data:`DISPLAY_NAME_MAX` characters; demangled names over 64 KiB are not read. Plain
    text: whoever renders it escapes it."""
    short = str(short or "")
    if not GENERIC_SHORT.fullmatch(short) or not demangled or len(demangled) > _DISPLAY_SOURCE_MAX:
        return short
    head, args = _split_name(str(demangled))
    if not args.strip() or head.rsplit("::", 1)[-1] != short:
        return short
    ident = _identity(args).strip()
    if not ident:
        return short
    scope = [c for c in head.split("::")[:-1] if c and "anonymous" not in c and c != "<unnamed>"]
    name = f"{scope[0]}::{short}<{ident}>" if scope else f"{short}<{ident}>"
    return name if len(name) <= DISPLAY_NAME_MAX else name[:DISPLAY_NAME_MAX - 2] + "…>"


#: A display name built by :func:`display_name` from a plain type name (CUTLASS library kernels:
#: ``cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>``), which the demangled name holds as is.
_VERBATIM = re.compile(r"(?:[A-Za-z_]\w*::)?([A-Za-z_]\w*)<([A-Za-z_]\w*)>")


def ncu_kernel_filter(name: str) -> tuple[str, str]:
    """(``--kernel-name-base``, ``--kernel-name``) that select the kernels of a kernel-table name in
    Nsight Compute: the function name ``^name$``; for a name built from a generic short name, the
    demangled name holding ``short<type>`` when the type is spelled as is, else ``^short$`` (every
    kernel under that generic name)."""
    m = _VERBATIM.fullmatch(name)
    if m and GENERIC_SHORT.fullmatch(m.group(1)):
        return "demangled", "regex:" + re.escape(m.group(1)) + r"<(\w+::)*" + re.escape(m.group(2)) + "[<>,]"
    m = re.match(r"(?:[A-Za-z_]\w*::)?([A-Za-z_]\w*)<", name)
    if m and GENERIC_SHORT.fullmatch(m.group(1)):
        return "function", "regex:^" + re.escape(m.group(1)) + "$"
    return "function", "regex:^" + re.escape(name) + "$"


#: Groups with at most this many rows take their quantiles from one shared packed sort; bigger
#: groups from a selection (``np.partition``) of their own rows, when there are at most
#: ``_MAX_SELECTIONS`` of them (one Python call each) and they hold at least half the rows.
_SMALL_GROUP_ROWS = 64
_MAX_SELECTIONS = 2048


def _group_stats(group: np.ndarray, dur: np.ndarray) -> Columns:
    """Exact per-group count/sum/mean/median/p95 (linear interpolation between order statistics,
    numpy's default) and the count under :data:`TINY_KERNEL_NS`.

    Groups that are small non-negative ids (kernel name codes) take one sort of (group, duration)
    packed in an int64 or, when a few big groups hold most rows (the usual case), a stable radix
    argsort on the group codes (linear time) and a selection per big group, with no full sort of
    the durations. Other ids take one lexicographic sort of (group, duration)."""
    if len(dur) == 0:
        return Columns({"group": [], "count": [], "total_ns": [], "mean_ns": [], "median_ns": [], "p95_ns": [],
                        "tiny": []})
    if dur.dtype != np.uint32:  # uint32 durations always fit the packed key's 40 bits
        dur = np.clip(dur, 0, (1 << 40) - 1)
    small_ids = len(group) and group.min() >= 0 and group.max() < (1 << 23)
    if small_ids:
        per = np.bincount(group)
        ids = np.flatnonzero(per)
        counts = per[ids]
        bounds = np.concatenate(([0], np.cumsum(counts)[:-1]))
        gb = ids
        qpos = {p: _qpos(counts, p) for p in (0.5, 0.95)}
        big = np.flatnonzero(counts > _SMALL_GROUP_ROWS)
    if small_ids and len(ids) < (1 << 16) and len(big) <= _MAX_SELECTIONS and \
            int(counts[big].sum()) * 2 >= len(dur):
        # most rows are in a few big groups: a stable radix argsort on the group codes (numpy's
        # stable sort of 16-bit integers) orders the rows by group in linear time, and each big
        # group's order statistics come from a selection of its own rows
        code = np.zeros(len(per), dtype=np.uint16)
        code[ids] = np.arange(len(ids), dtype=np.uint16)
        order = np.argsort(code[group], kind="stable")
        d = dur[order]
        del order
        small = np.flatnonzero(counts <= _SMALL_GROUP_ROWS)
        if len(small):  # the small groups' rows: one packed sort of (group, duration)
            rows = np.repeat(bounds[small], counts[small]) + _ranks(counts[small])
            d[rows] = _durations_by_group(np.repeat(small.astype(np.int64), counts[small]), d[rows]).astype(
                d.dtype, copy=False)
            del rows
        for i in big.tolist():
            a = int(bounds[i])
            kth = sorted({int(qpos[p][j][i]) for p in qpos for j in (0, 1)})
            d[a:a + int(counts[i])].partition(kth)
    elif small_ids:
        # groups are small non-negative ids: their sizes give the boundaries in the sorted array,
        # so the only full-length temporary is the packed key itself
        d = _durations_by_group(group.astype(np.int64), dur)
    else:
        order = np.lexsort((dur, group))
        g, d = group[order], dur[order]
        bounds = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
        counts = np.diff(np.append(bounds, len(g)))
        gb = g[bounds]
        qpos = {p: _qpos(counts, p) for p in (0.5, 0.95)}
    totals = np.add.reduceat(d, bounds, dtype=np.int64)

    def q(p):
        lo, hi, frac = qpos[p]
        return d[bounds + lo] * (1 - frac) + d[bounds + hi] * frac

    tiny = np.add.reduceat(d < TINY_KERNEL_NS, bounds, dtype=np.int64)
    return Columns({"group": gb, "count": counts, "total_ns": totals,
                    "mean_ns": totals / counts, "median_ns": q(0.5), "p95_ns": q(0.95), "tiny": tiny})


def _durations_by_group(packed: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """The durations ordered by (group, duration): ``packed`` (int64 group ids below 2**23, reused
    as the result) gets the durations (below 2**40) in its low 40 bits, one in-place sort, and
    the group bits masked off."""
    packed <<= 40
    packed |= dur
    packed.sort()
    packed &= (1 << 40) - 1
    return packed


def _qpos(counts: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions (within each group) of the two order statistics quantile ``p`` interpolates
    between, and the weight of the upper one."""
    pos = (counts - 1) * p
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    return lo, hi, pos - lo


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c-1 for each count c, concatenated."""
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)


def kernel_summary(dur_ns: np.ndarray, in_place: bool = False) -> dict:
    """Count, total, mean, median, p95 and share under 10 µs of kernel durations. With
    ``in_place`` the array is reordered to find the quantiles (no copy of it is made)."""
    n = len(dur_ns)
    if n == 0:
        return {"count": 0, "total_ms": 0.0, "mean_us": None, "median_us": None, "p95_us": None,
                "under_10us_pct": None}
    total = dur_ns.sum()
    mean = dur_ns.mean()
    tiny = (dur_ns < TINY_KERNEL_NS).mean()
    med, p95 = np.quantile(dur_ns, [0.5, 0.95], overwrite_input=in_place)
    return {
        "count": int(n),
        "total_ms": float(total / 1e6),
        "mean_us": float(mean / 1e3),
        "median_us": float(med / 1e3),
        "p95_us": float(p95 / 1e3),
        "under_10us_pct": float(tiny * 100),
    }


def _stats_durations(dur_ns) -> np.ndarray:
    dur_ns = np.asarray(dur_ns)
    return dur_ns if dur_ns.dtype == np.uint32 else dur_ns.astype(np.int64)


def _coarser_stats(fine: Columns, fine_code: np.ndarray, coarse_code: np.ndarray, dur: np.ndarray) -> Columns:
    """:func:`_group_stats` by ``coarse_code`` (short names) given the stats by ``fine_code`` (full
    names) of the same rows: a coarse group holding the rows of exactly one fine group, all of
    them, has that group's numbers (same rows, same durations: the same exact quantiles); only the
    rows of the other coarse groups (several full names under one short name) are grouped again."""
    fine_code, coarse_code = np.asarray(fine_code), np.asarray(coarse_code)
    if len(fine) == 0 or not len(coarse_code) or min(int(fine_code.min()), int(coarse_code.min())) < 0 \
            or max(int(fine_code.max()), int(coarse_code.max())) >= (1 << 23):
        return _group_stats(coarse_code, dur)
    nf, nc = int(fine_code.max()) + 1, int(coarse_code.max()) + 1
    cmin = np.full(nf, nc, dtype=np.int64)
    cmax = np.full(nf, -1, dtype=np.int64)
    idx, val = fine_code.astype(np.intp), coarse_code.astype(np.int64)  # ufunc.at is 15x slower on mixed dtypes
    np.minimum.at(cmin, idx, val)
    np.maximum.at(cmax, idx, val)
    del idx, val
    used = np.asarray(fine["group"]).astype(np.int64)
    short_of = cmin[used]  # a full name's (smallest) short name: a valid code, it has rows
    one = short_of == cmax[used]  # every row of this full name has the same short name
    members = np.bincount(short_of[one], minlength=nc)
    shared = np.zeros(nc, dtype=bool)  # short names holding rows of a full name with several
    if not one.all():
        split_fine = np.zeros(nf, dtype=bool)
        split_fine[used[~one]] = True
        shared[coarse_code[split_fine[fine_code]]] = True
    reuse = (members == 1) & ~shared
    take_rows = np.flatnonzero(one & reuse[short_of])
    parts = [fine.take(take_rows).assign(group=short_of[take_rows])]
    if len(take_rows) < len(used):  # some short names hold several full names (or parts of them)
        rest = ~reuse[coarse_code]
        if rest.any():
            parts.append(_group_stats(coarse_code[rest], dur[rest]))
    if len(parts) > 1:
        out = Columns({k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0].columns})
    else:
        out = parts[0]
    return out.take(np.argsort(np.asarray(out["group"]), kind="stable"))


def kernel_tables(name_code: np.ndarray, short_code: np.ndarray, dur_ns: np.ndarray, names,
                  is_nccl: np.ndarray | None, name_ids: np.ndarray, short_ids: np.ndarray,
                  short_limit: int | None = None) -> tuple[Columns, Columns]:
    """(by short name, by full name with ``code`` and ``total_ns``): the two :func:`kernels_by_name`
    tables of the same kernels, the short-name statistics reusing the full-name ones wherever a
    short name has a single full name (one selection pass instead of two)."""
    dur = _stats_durations(dur_ns)
    fine = _group_stats(np.asarray(name_code), dur)
    by_name = kernels_by_name(name_code, dur, names, is_nccl, ids=name_ids, codes=True, stats=fine)
    shown = display_codes(name_code, short_code, names, name_ids, short_ids)
    if shown is None:  # no generic short name: the display names are the short names
        coarse = _coarser_stats(fine, name_code, short_code, dur)
        by_short = kernels_by_name(short_code, dur, names, is_nccl, limit=short_limit, ids=short_ids, stats=coarse)
    else:
        code, table = shown
        coarse = _coarser_stats(fine, name_code, code, dur)
        by_short = kernels_by_name(code, dur, table, is_nccl, limit=short_limit, stats=coarse)
    return by_short, by_name


def display_codes(name_code: np.ndarray, short_code: np.ndarray, names, name_ids: np.ndarray,
                  short_ids: np.ndarray) -> tuple[np.ndarray, StringTable] | None:
    """Per-kernel codes of :func:`display_name` and the table of their strings (code i = id i), or
    None when no short name is generic (the display names are then the short names). The names
    are built once per distinct (short name, full name) pair under a generic short name, never per
    kernel: the kernels under generic short names are keyed by full-name code times the number of
    generic short names plus the generic short name's rank, and counted with one ``bincount``."""
    name_code, short_code = np.asarray(name_code), np.asarray(short_code)
    shorts = [str(v) for v in names.lookup(short_ids)]
    generic = np.fromiter((GENERIC_SHORT.fullmatch(v) is not None for v in shorts), dtype=bool, count=len(shorts))
    if not generic.any() or not len(short_code):
        return None
    rank = np.full(len(shorts), -1, dtype=np.int64)
    gcodes = np.flatnonzero(generic)
    rank[gcodes] = np.arange(len(gcodes))
    ng, nf = len(gcodes), max(len(name_ids), int(name_code.max()) + 1)
    # np.take: half the time of fancy indexing on millions of 2-byte codes
    sel = np.flatnonzero(np.take(generic, short_code))
    if not len(sel):
        return None
    kdt = np.uint32 if nf * ng < (1 << 32) else np.int64
    key = np.take(name_code, sel).astype(kdt)
    key *= kdt(ng)
    key += np.take(rank, np.take(short_code, sel)).astype(kdt)
    if nf * ng <= (1 << 24):
        pairs = np.flatnonzero(np.bincount(key, minlength=nf * ng))
    else:
        pairs = np.unique(key).astype(np.int64)
    full = names.lookup(name_ids[pairs // ng])
    # display strings: the short names first (code order), then one per pair; equal strings share a code
    index: dict[str, int] = {}
    of_short = np.array([index.setdefault(v, len(index)) for v in shorts], dtype=np.int64)
    of_pair = np.array([index.setdefault(display_name(shorts[gcodes[r]], str(f)), len(index))
                        for r, f in zip((pairs % ng).tolist(), full)], dtype=np.int64)
    dt = np.uint16 if len(index) < (1 << 16) else np.int32
    code = np.take(of_short.astype(dt), short_code)
    if nf * ng <= (1 << 24):
        lut = np.zeros(nf * ng, dtype=dt)
        lut[pairs] = of_pair
        code[sel] = np.take(lut, key)
    else:
        code[sel] = of_pair[np.searchsorted(pairs, key)].astype(dt)
    table = StringTable(np.arange(len(index)), np.array(list(index), dtype=object))
    return code, table


def kernels_by_name(name_id: np.ndarray, dur_ns: np.ndarray, names, is_nccl: np.ndarray | None = None,
                    limit: int | None = None, ids: np.ndarray | None = None, codes: bool = False,
                    stats: Columns | None = None) -> Columns:
    """Per-name table sorted by total time: name, count, total_ms, mean_us, median_us, p95_us,
    share_of_kernel_time_pct, under_10us_pct, is_nccl. With ``ids``, ``name_id`` holds dense codes
    and ``ids[code]`` is the string id (codes in the order of the ids); ``codes`` adds the group
    id (``code``) and its exact total (``total_ns``); ``stats``: :func:`_group_stats` of these
    rows, when already computed."""
    st = stats if stats is not None else _group_stats(np.asarray(name_id), _stats_durations(dur_ns))
    if len(st) == 0:
        cols = ("name", "count", "total_ms", "mean_us", "median_us", "p95_us",
                "share_of_kernel_time_pct", "under_10us_pct", "is_nccl") + (("code", "total_ns") if codes else ())
        return Columns({c: [] for c in cols})
    total_ns = np.asarray(st["total_ns"])
    count = np.asarray(st["count"]).astype(np.int64)
    total = float(total_ns.sum())
    group = np.asarray(st["group"]).astype(np.int64)
    df = Columns({
        "name": names.lookup(ids[group] if ids is not None else group),
        "count": count,
        "total_ms": total_ns.astype(np.float64) / 1e6,
        "mean_us": np.asarray(st["mean_ns"]) / 1e3,
        "median_us": np.asarray(st["median_ns"]) / 1e3,
        "p95_us": np.asarray(st["p95_ns"]) / 1e3,
        "share_of_kernel_time_pct": total_ns / total * 100 if total else np.zeros(len(group)),
        "under_10us_pct": np.asarray(st["tiny"]) / count * 100,
    })
    if is_nccl is not None:
        nccl_ids = np.unique(np.asarray(name_id)[np.asarray(is_nccl)])
        df["is_nccl"] = np.isin(group, nccl_ids)
    if codes:
        df["code"] = group
        df["total_ns"] = total_ns
    # by total time, then count (both descending); ties keep the group order
    df = df.take(np.lexsort((-count, -df["total_ms"])))
    return df.head(limit) if limit else df
