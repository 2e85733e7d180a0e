"""The GEMM precision name heuristic (``nsysdoc.metrics.kernels``; glossary: fp32_gemm_ms) on real kernel
names: from the exports in ../shared/traces and the Kineto traces there (marked "trace"), from the
cuBLAS/cuDNN/CUTLASS/PyTorch names that nsys and the PyTorch profiler print, and from public profiles.

Each row: name, expected ``gemm_precision`` and expected ``uses_tensor_cores``; ``is_fp32_gemm`` must be
``gemm_precision == "fp32-simt"``.
"""
from __future__ import annotations

import sqlite3

import pytest

from nsysdoc.metrics.kernels import gemm_precision, is_fp32_gemm, uses_tensor_cores

from .conftest import SHARED_TRACES, needs_shared, skip_without_shared

FP32, TF32, BF16, FP16, FP8, INT8, FP64, CPLX = "fp32-simt", "tf32", "bf16", "fp16", "fp8", "int8", "fp64", "complex"

CASES = [
    # --- FP32 on CUDA cores: what TF32 / AMP would speed up -------------------------------------------------
    ("volta_sgemm_128x64_nn", FP32, False),
    ("ampere_sgemm_128x32_nn", FP32, False),  # trace (mmagic, A100)
    ("ampere_sgemm_64x32_sliced1x4_nn", FP32, False),  # trace
    ("maxwell_sgemm_128x64_nt", FP32, False),
    # cuBLAS FP32 on H100: an "xmma"/sm80_ (tensor-core family) kernel, but FFMA math (trace, FastVideo)
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_"
     "execute_kernel__5x_cublas", FP32, False),
    # the split-K variant is the GEMM itself (its partial sums are reduced by splitKreduce_kernel) (trace)
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
     "execute_split_k_kernel__5x_cublas", FP32, False),
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc_tilesize128x128x8_stage3_warpsize2x2x1_g1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cudnn", FP32, False),
    ("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)", FP32, False),  # trace
    ("cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>", FP32, False),
    ("volta_scudnn_128x64_relu_interior_nn_v1", FP32, False),  # trace (V100 ResNet-50); "scudnn" = FP32 cuDNN
    ("volta_scudnn_128x128_stridedB_splitK_small_nn_v1", FP32, False),  # trace
    # fused Winograd convolution: FP32 conv math, unlike the winograd*Data/Filter/Output transforms below (trace)
    ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", FP32, False),
    ("maxwell_scudnn_winograd_128x128_ldg1_ldg4_tile148n_nt", FP32, False),
    ("ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", FP32, False),
    ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, "
     "float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, "
     "float const*, float const*, bool, int, int)", FP32, False),  # trace
    ("implicit_convolve_sgemm", FP32, False),
    ("void explicit_convolve_sgemm<float, int, 1024, 5, 5, 3, 3, 3, 0, false>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_conv_params, unsigned long long, int, unsigned long long, int, float, "
     "float, int, float const*, float const*)", FP32, False),  # trace
    # cuDNN FP32 weight/data-gradient engines: the name has no "sgemm", the first template argument says float (trace)
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float const*, int, "
     "float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)", FP32, False),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, "
     "int, int)", FP32, False),  # trace
    # cuBLAS small-N GEMM: a real GEMM (unlike gemv/gemmk1), FP32 by its first template argument
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<"
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float>)", FP32, False),
    # --- TF32 tensor cores -------------------------------------------------------------------------------
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn", TF32, True),
    # cuDNN implicit GEMM on FP32 tensors through TF32 MMAs (trace, mmagic)
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x32x64_stage5_warpsize2x2x1_"
     "g1_tensor16x8x8_alignc4_execute_kernel_cudnn_infer", TF32, True),
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_64x64_32x5_nhwc_align4>"
     "(T1::Params)", TF32, True),  # trace
    # s1688 without a 16-bit type = FP32 data through 16x8x8 TF32 MMAs (trace, HTA A100)
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_"
     "128x128_32x3_nn_align4::Params)", TF32, True),
    ("nvjet_sss_tf32_128x256_TNT", TF32, True),  # as quoted in a public profile: FP32 data, TF32 compute
    # --- BF16 ---------------------------------------------------------------------------------------------
    # nvjet type letters: t = BF16 inputs (s = FP32 accumulate); the same trace runs bf16 elementwise kernels (trace)
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", BF16, True),
    ("nvjet_tst_96x64_64x10_1x2_h_bz_bias_TNN", BF16, True),  # trace: "bias" is the fused epilogue
    ("nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT", BF16, True),  # Blackwell form with an sm100_ infix
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", BF16, True),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", BF16, True),
    ("cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8>", BF16, True),
    ("cutlass_80_tensorop_bf16_s16816gemm", BF16, True),
    ("cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1", BF16, True),  # bf16 wins over the TF32 "s1688"
    # flash attention: precision from the cutlass::bfloat16_t template argument (trace)
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, "
     "cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, (bool)0, "
     "(bool)0, (bool)0, (bool)0, (bool)0, (bool)0>(Flash_fwd_params)", BF16, True),
    # --- FP16 ---------------------------------------------------------------------------------------------
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", FP16, True),  # trace (nvFuser matmul on __half tensors)
    ("nvjet_sm90_hss_64x8_64x16_1x1_h_bz_splitK_NNT", FP16, True),  # FP16 in, FP32 out
    ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", FP16, True),  # s1688 with fp16 types is FP16, not TF32
    ("volta_h884gemm_64x64_ldg8_nn", FP16, True),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", FP16, True),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", FP16, True),
    ("sm75_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage1_warpsize2x2x1_g1_"
     "tensor16x8x8_execute_kernel_cudnn", FP16, True),
    # a convolution whose name carries the output layout "nhwc2nchw": still a conv, not a layout transform
    ("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1", FP16, True),
    # FP16 data, FP32 math on CUDA cores ("scudnn"): not FP32 data, AMP already on, no tensor cores
    ("volta_fp16_scudnn_fp16_128x64_relu_interior_nn_v1", FP16, False),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>>"
     "(Flash_fwd_params)", FP16, True),
    # --- FP8 / INT8 / FP64 / complex ----------------------------------------------------------------------
    ("nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT", FP8, True),  # q = FP8 inputs, bf16 output
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", FP8, True),
    ("cutlass3x_sm100_bstensorop_s256x256x64gemm_block_scaled_ue4m3xf4_ue4m3xf4_f32_bf16_bf16_256x256x256",
     FP8, True),  # NVFP4 (block-scaled FP4) counts as "fp8 or narrower"
    ("cutlass3x_sm100_tensorop_i256x256x32gemm_s8_s8_s32_s32_s32_256x256x128_0_tnn_align16_2sm", INT8, True),
    ("cutlass_tensorop_i16832gemm_s8_256x128_64x3_tn_align16", INT8, True),
    ("volta_dgemm_64x64_nn", FP64, False),  # FP64 SIMT: not FP32, TF32/AMP do not apply
    ("sm80_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize128x64x16_stage4_warpsize2x2x1_execute_kernel__5x_cublas",
     FP64, True),  # A100 FP64 tensor cores (DMMA)
    ("volta_cgemm_32x32_tn", CPLX, False),  # the complex GEMM of cuDNN FFT convolutions
    ("magma_zgemm_kernel", CPLX, False),
    ("void cutlass::Kernel<cutlass_80_tensorop_c1688gemm_64x64_16x4_nn_align1>(T1::Params)", CPLX, True),
    # --- not GEMM/conv math tensor cores could speed up: None ---------------------------------------------
    # cuBLAS matrix-vector products: memory-bound, no tensor cores (trace, HTA A100)
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemvParams<"
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float>>(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)",
     None, False),
    ("void gemv2N_kernel<int, int, float, float, float, float, 128, 8, 4, 4, 1, false, cublasGemvParams<"
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float>>(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)", None, False),
    ("gemvNSP_kernel", None, False),
    # cuBLASLt gemv wrapped in a return type with template arguments (trace, mmagic: complex float2 gemv)
    ("std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float2, float2, float2, float2, (bool)0, "
     "(bool)1, (bool)1, (bool)0, (int)6, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const "
     "float2>, cublasGemvTensorStridedBatched<const float2>, cublasGemvTensorStridedBatched<float2>, float2>>"
     "(T13, T6, T6)", None, False),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true, "
     "false, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<"
     "float const>, cublasGemvTensorStridedBatched<float>, float>>(cublasGemvParams<cublasGemvTensorStridedBatched<"
     "float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)",
     None, False),  # trace
    # gemmk1 = GEMM with K = 1 (outer product): memory-bound, tensor cores do not help (trace)
    ("void gemmk1_kernel<float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, true, true>"
     "(cublasGemmk1Params<float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float "
     "const>, cublasGemvTensorStridedBatched<float>, float>)", None, False),
    # split-K reductions: the epilogue that sums a split-K GEMM's partial results (trace)
    ("void splitKreduce_kernel<(int)32, (int)16, int, float, float, float, float, (bool)1, (bool)0, (bool)0>("
     "cublasSplitKParams<T6>, const T4 *, const T5 *, T5 *, const T6 *, const T6 *, const T7 *, const T4 *, T7 *, "
     "void *, long, T6 *, int *)", None, False),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, false, false>("
     "cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, "
     "float const*, float const*, float*, void*, long, float*, int*)", None, False),
    ("splitKreduce_kernel", None, False),  # trace (short name)
    ("void reduce_1Block_kernel<float, 128, 7, cublasGemvTensorStridedBatched<float>, cublasGemvTensorStridedBatched<"
     "float>, cublasGemvTensorStridedBatched<float>>(float const*, float, cublasGemvTensorStridedBatched<float>, int)",
     None, False),
    ("void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*, cublasLtEpilogue_t, "
     "int, float*, long, void*, long, long, long, float*, long, int*)", None, False),  # trace: cuBLASLt epilogue
    # im2col/col2im and variants: memory-bound unfolds feeding a GEMM
    ("void deformable_im2col_gpu_kernel<float>(int, const T1 *, const T1 *, int, int, int, int, int, int, int, int, "
     "int, int, int, int, int, int, int, int, T1 *)", None, False),  # trace
    ("void at::native::im2col_kernel<float>(long, float const*, long, long, long, long, long, long, long, long, long, "
     "long, long, long, float*)", None, False),
    ("void at::native::vol2col_kernel<float>(long, float const*, int, int, int, int, int, int, int, int, int, int, "
     "int, int, int, int, int, float*)", None, False),
    ("void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_params, cudnnConvolutionStruct, "
     "cudnnTensor4dStruct, float const*, float*)", None, False),  # trace
    # cuDNN layout transforms and offset precomputation (trace)
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)0, (bool)1, (cudnnKernelDataType_t)2>("
     "cudnn::ops::nchw2nhwc_params_t<T3>, const T1 *, T2 *)", None, False),
    ("void nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>(int, int, int, int, "
     "float const*, float*, float, float)", None, False),
    ("void cudnn::ops::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)0>(float, float const*, "
     "float, float*, unsigned long)", None, False),
    ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", None, False),
    ("cask_cudnn::computeWgradSplitKOffsetsKernel(cask_cudnn::ComputeSplitKOffsetsParams)", None, False),  # "wgrad"
    # FFT convolution stages: FFTs, not GEMMs (trace)
    ("void fft2d_r2c_32x32<float, (bool)0, (unsigned int)1, (bool)0>(float2 *, const T1 *, int, int, int, int, int, "
     "int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)", None, False),
    ("fft2d_c2r_32x32", None, False),
    # Winograd transforms: elementwise tile transforms around a batched GEMM (trace)
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
     "WinogradDataParams<float, float>)", None, False),
    ("void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>(cudnn::winograd_nonfused::"
     "WinogradFilterParams<float, float>)", None, False),
    ("void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cudnn::winograd_nonfused::"
     "WinogradOutputParams<float, float>)", None, False),
    ("void cudnn::winograd::generateWinogradTilesKernel<0, float, float>(cudnn::winograd::"
     "GenerateWinogradTilesParams<float, float>)", None, False),
    # depthwise conv: memory-bound direct convolution on CUDA cores, not tensor-core GEMM work
    ("void at::native::<unnamed>::conv_depthwise2d_forward_kernel<(int)0, float, int>(at::GenericPackedTensorAccessor"
     "<float, (unsigned long)4, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float, (unsigned long)4, "
     "at::DefaultPtrTraits, int>, int, int, int, int, int, int, int, int, int, int, int, int, int)", None, False),
    # "fbgemm" (embedding ops) is not a GEMM; float template arguments do not make one (trace)
    ("void fbgemm_gpu::permute_indices_weights_kernel<true, int, float>(int, int, int, int const*, float const*, "
     "int const*, int const*, int const*, int*, float*)", None, False),
    # elementwise kernels: float / BFloat16 / Half template arguments never make a GEMM (trace)
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, std::array<char *, "
     "(unsigned long)3>>(int, T2, T3)", None, False),
    ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char *, (unsigned long)3>>(int, T2, T3)", None, False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>(at::"
     "TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::"
     "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::"
     "Array<char*, 3>)", None, False),  # trace: old demangler style
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, float const*, int, int, "
     "int)", None, False),  # trace
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", None, False),  # trace: "int8" in an NCCL kernel
    ("elementwise_kernel_f32", None, False),
    # --- GEMMs whose precision the name does not tell: None ---------------------------------------------
    ("flash_fwd_kernel", None, True),  # trace (short name): flash attention is fp16/bf16 MMA, type not named
    ("triton_tem_fused_mm_0", None, False),  # Inductor matmul template: dtype and TF32 setting not in the name
    ("triton_poi_fused_addmm_relu_0", None, False),  # Inductor pointwise epilogue named after the addmm it follows
    ("Kernel", None, False),  # trace: short name of cutlass::Kernel<...>
    ("<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::Tensor<"
     "<unnamed>::__half, (int)3, (int)3>, <unnamed>::TensorMap, <unnamed>::TensorMap, <unnamed>::Tensor<<unnamed>::"
     "__half, (int)2, (int)2>)", None, False),  # trace: an nvFuser matmul, nothing in the name says so
]


@pytest.mark.parametrize("name, precision, tensor_cores", CASES, ids=[c[0][:70] for c in CASES])
def test_gemm_precision(name, precision, tensor_cores):
    assert gemm_precision(name) == precision
    assert is_fp32_gemm(name) == (precision == FP32)
    assert uses_tensor_cores(name) == tensor_cores


def test_table_is_large_and_unique():
    names = [c[0] for c in CASES]
    assert len(names) >= 60 and len(set(names)) == len(names)


def _trace_kernel_names(path):
    con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone():
            return set()
        return {n for col in ("demangledName", "shortName") for (n,) in con.execute(
            f"SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.{col}")}
    finally:
        con.close()


def _traces():
    return sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []


@needs_shared()
@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name)
def test_real_trace_names_are_consistent(path):
    """Every kernel name of the real exports: is_fp32_gemm agrees with gemm_precision, an FP32 GEMM never
    "uses tensor cores", and kernels without GEMM/conv/attention in their own name get no precision."""
    for name in _trace_kernel_names(path):
        p = gemm_precision(name)
        assert p in (None, FP32, TF32, BF16, FP16, FP8, INT8, FP64, CPLX)
        assert is_fp32_gemm(name) == (p == FP32)
        assert not (p == FP32 and uses_tensor_cores(name))
        if "elementwise" in name or name.startswith(("nccl", "void at::native::reduce_kernel")):
            assert p is None and not uses_tensor_cores(name), name


@needs_shared()
@pytest.mark.parametrize("file, expected", [
    # the FFMA cuBLAS kernels and nothing else (the same set test_real_traces checks by time)
    ("fastvideo_h100x2_sp2_slice.sqlite", lambda n: "gemm" in n and "ffma" in n),
    # SGEMMs and the CUTLASS SIMT SGEMM; not gemvx, splitKreduce, im2col, FFT or the TF32 cuDNN kernels
    ("mmagic_vsr_a100_forward.sqlite", lambda n: "sgemm" in n),
    # bf16/fp16 nvjet kernels only
    ("fastvideo_torchrun_h100x2_after.sqlite", lambda n: False),
    ("nvfuser_matmul_h100.sqlite", lambda n: False),
])
def test_fp32_gemms_of_real_traces(file, expected):
    path = SHARED_TRACES / file
    skip_without_shared(file)
    names = _trace_kernel_names(path)
    assert names
    assert {n for n in names if is_fp32_gemm(n)} == {n for n in names if expected(n)}
