"""torch_timing.py — what the PyTorch benchmark scripts share: the CSV
header of the C benchmarks, CUDA-event timing with an L2 flush before every
timed run (a buffer of 4x the L2 size, at least 256 MiB, zeroed outside the
timed interval — bench/gpu_timer.c does the same), and the shape sweeps,
written exactly as bench/bench_attention.c, bench/bench_norms.c and
bench/bench_gemm.c write them (keep them in step; CTests bench_gemm_dry_run
and bench_norms_dry_run compare the GEMM and the norms' names).
"""
import sys

ATTN_HEADER = ("suite,impl,dtype,batch,heads,seq_q,seq_k,head_dim,causal,kv_heads,mask,path,pipeline_s,"
               "compile_s,compile_cache,median_ms,min_ms,tflops,gbps,modelled_us,device,status")
NORM_HEADER = ("op,impl,dtype,rows,width,median_ms,min_ms,gbps,copy_gbps,fraction_of_copy,device,status")
GEMM_HEADER = ("suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,pipeline_s,compile_s,"
               "compile_cache,median_us,min_us,tflops,modelled_us,device,status")


def attention_shapes(suite="all"):
    """(suite, dtype, batch, heads, kv_heads, nq, nk, d, causal, mask) as
    bench_attention.c sweeps them; mask: "none", "pad" ([B, 1, 1, Nk]) or
    "rows" ([B, 1, Nq, Nk])."""
    out = []
    if suite in ("all", "fa3"):
        for causal in (False, True):
            for dt in ("f16", "bf16"):
                for d in (64, 128, 256):
                    seq = 512
                    while seq <= 16384:
                        out.append(("fa3", dt, 16384 // seq, 2048 // d, 2048 // d, seq, seq, d, causal, "none"))
                        seq *= 2
    if suite in ("all", "decode"):
        for b in (1, 8, 64):
            nk = 1024
            while nk <= 131072:
                if b * nk <= (1 << 18) and (nk in (1024, 4096, 16384) or nk >= 65536):
                    out.append(("decode", "f16", b, 16, 16, 1, nk, 128, False, "none"))
                    out.append(("decode", "f16", b, 32, 8, 1, nk, 128, False, "none"))
                nk *= 2
    if suite in ("all", "gqa"):
        for dt in ("f16", "bf16"):
            for causal in (False, True):
                for seq in (1024, 4096):
                    out.append(("gqa", dt, 16384 // seq, 32, 8, seq, seq, 128, causal, "none"))
                out.append(("gqa", dt, 8, 64, 8, 2048, 2048, 128, causal, "none"))
                out.append(("gqa", dt, 8, 16, 1, 2048, 2048, 128, causal, "none"))
    if suite in ("all", "mask"):
        for seq in (2048, 4096):
            for causal in (False, True):
                out.append(("mask", "f16", 16384 // seq, 16, 16, seq, seq, 128, causal, "pad"))
            out.append(("mask", "f16", 16384 // seq, 16, 16, seq, seq, 128, False, "rows"))
    if suite in ("all", "cross"):
        for d in (64, 128):
            for nq, nk in ((4096, 77), (77, 4096), (1024, 4096), (4096, 1024), (128, 16384)):
                out.append(("cross", "f16", 8, 2048 // d, 2048 // d, nq, nk, d, False, "none"))
    return out


def attention_name(suite, dt, b, h, kvh, nq, nk, d, causal, mask):
    """The shape's name as bench_attention.c writes it (--match)."""
    return "%s/%s/d%d/b%d/h%d%s/q%d/k%d/%s%s" % (
        suite, dt, d, b, h, "/kv%d" % kvh if kvh != h else "", nq, nk, "causal" if causal else "full",
        "/mask-" + mask if mask != "none" else "")


def matches(name, match):
    """--match TEXT[,TEXT...]: any of the texts in the name."""
    return not match or any(m and m in name for m in match.split(","))


def attention_bytes(dt, b, h, kvh, nq, nk, d, mask):
    """The compulsory bytes (Q, K, V, O, the mask), as bench_attention.c counts them."""
    es = 4 if dt == "f32" else 2
    m = b * nk if mask == "pad" else b * nq * nk if mask == "rows" else 0
    return es * (b * d * (2 * h * nq + 2 * kvh * nk) + m)


def norm_shapes():
    """(op, dtype, rows, width): 2^25 elements per shape, width 1k..256k."""
    out = []
    for op in ("layernorm", "rmsnorm", "softmax"):
        for dt in ("f32", "f16", "bf16"):
            w = 1024
            while w <= 262144:
                out.append((op, dt, (1 << 25) // w, w))
                w *= 2
    return out


def elementwise_shapes():
    """(op, dtype, rows, width) of bench_norms' elementwise suite: swiglu
    (silu(g) * u, [T, 11008]) and bias_gelu (gelu_tanh(x + b), [T, 3072])
    in f16 and bf16, add_cast (cast(x + r), x and r f32 [T, 4096]) to bf16
    and f16 (dtype "f32-bf16", "f32-f16"); T = 512, 4096 tokens."""
    out = []
    for op, w in (("swiglu", 11008), ("bias_gelu", 3072), ("add_cast", 4096)):
        for dt in ("f16", "bf16"):
            for t in (512, 4096):
                out.append((op, "f32-" + dt if op == "add_cast" else dt, t, w))
    return out


def norms_suite_shapes(suite="all"):
    """bench_norms' sweep in its order: the norms, then the elementwise suite."""
    return ((norm_shapes() if suite in ("all", "norms") else []) +
            (elementwise_shapes() if suite in ("all", "elementwise") else []))


def norm_name(op, dt, rows, w):
    """The shape's name as bench_norms.c writes it (--match)."""
    return "%s/%s/r%d/w%d" % (op, dt, rows, w)


def gemm_shapes(suite="all"):
    """(suite, label, dtype, batch, m, n, k, trans_b, shared_b, weight_b, epilogue, conv)
    as bench_gemm.c sweeps them: A [batch,] M x K; B [N, K] when trans_b
    (a Linear layer's weight), [K, N] otherwise, without batch dims when
    shared_b; weight_b: B is a weight (models) rather than an input; conv
    None, or for a conv2d (c, h, w, o, kh, kw, stride, pad) of batch
    images [C, H, W] (NCHW), its GEMM view m = O, n = OH*OW, k = C*KH*KW.
    The cast suite's A (or gate and up) is f32, cast to dtype."""
    out = []
    if suite in ("all", "plain"):
        for dt in ("f16", "bf16"):
            for m, n, k in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                            (4095, 4097, 1000), (1, 4096, 4096), (128, 12288, 4096)):
                out.append(("plain", None, dt, 1, m, n, k, False, False, False, "none"))
    if suite in ("all", "epilogue"):
        for label, dt, batch, tokens, n, k, tb, epi in (
                ("gpt2_c_fc", "f16", 8, 8192, 3072, 768, False, "bias_gelu_tanh"),
                ("bert_intermediate", "f16", 8, 4096, 3072, 768, True, "bias_gelu_erf"),
                ("opt_fc1", "f16", 8, 8192, 8192, 2048, True, "bias_relu"),
                ("gpt2_c_proj", "f16", 8, 8192, 768, 3072, False, "bias_residual"),
                ("llama_o_proj", "bf16", 4, 8192, 4096, 4096, True, "residual"),
                ("lm_head", "bf16", 1, 2048, 32000, 4096, True, "scale_cast_f32")):
            out.append(("epilogue", label, dt, 1, tokens, n, k, tb, True, True, epi))
            if batch > 1:
                out.append(("epilogue", label, dt, batch, tokens // batch, n, k, tb, True, True, epi))
    if suite in ("all", "swiglu"):
        for dt in ("f16", "bf16"):
            for tokens in (2048, 8192):
                out.append(("swiglu", "llama_down_proj", dt, 1, tokens, 4096, 11008, True, True, True,
                            "silu_mul_prologue"))
    if suite in ("all", "batch"):
        for dt in ("f16", "bf16"):
            out.append(("batch", None, dt, 64, 512, 512, 512, False, False, False, "none"))
        out.append(("batch", "attn_qk", "f16", 96, 1024, 1024, 64, True, False, False, "none"))
        out.append(("batch", "attn_pv", "f16", 96, 1024, 64, 1024, False, False, False, "none"))
        out.append(("batch", "gpt2_attn_c_proj", "f16", 8, 1024, 768, 768, False, True, True, "none"))
        out.append(("batch", "llama_q_proj", "bf16", 4, 2048, 4096, 4096, True, True, True, "none"))
    out = [s + (None,) for s in out]
    if suite in ("all", "conv"):   # 3x3, pad 1, bias + ReLU
        for dt in ("f16", "bf16"):
            for label, n, c, h, w, o, stride, epi in (
                    ("resnet_layer1", 32, 64, 56, 56, 64, 1, "bias_relu"),
                    ("resnet_layer1", 32, 64, 56, 56, 64, 1, "bias_residual_relu"),
                    (None, 32, 128, 56, 56, 128, 1, "bias_relu"),
                    (None, 8, 256, 64, 64, 256, 1, "bias_relu"),
                    (None, 8, 64, 112, 112, 64, 1, "bias_relu"),
                    ("resnet_layer2", 32, 128, 28, 28, 128, 1, "bias_relu"),
                    ("resnet_layer2_down", 32, 64, 56, 56, 128, 2, "bias_relu")):
                oh, ow = (h + 2 - 3) // stride + 1, (w + 2 - 3) // stride + 1
                out.append(("conv", label, dt, n, o, oh * ow, c * 9, False, True, True, epi,
                            (c, h, w, o, 3, 3, stride, 1)))
    if suite in ("all", "mlp"):   # Llama's gated MLP whole: n = F, k = D; the model's plan, the GLU forced
        for tokens in (16, 512, 8192):
            for epi in ("gated_mlp", "gated_mlp_glu"):
                out.append(("mlp", "llama7_mlp", "f16", 1, tokens, 11008, 4096, True, True, True, epi, None))
                out.append(("mlp", "llama3_8b_mlp", "bf16", 1, tokens, 14336, 4096, True, True, True, epi, None))
    if suite in ("all", "cast"):   # A arrives in f32
        for tokens in (16, 64, 512, 8192):
            for label, dt, k, epi in (("llama_q_proj", "bf16", 4096, "cast_f32_prologue"),
                                      ("llama_down_proj", "bf16", 11008, "cast_f32_prologue"),
                                      ("llama_q_proj", "f16", 4096, "cast_f32_prologue"),
                                      ("llama_down_proj", "bf16", 11008, "silu_mul_cast_f32_prologue")):
                out.append(("cast", label, dt, 1, tokens, 4096, k, True, True, True, epi, None))
    return out


def gemm_name(suite, label, dt, batch, m, n, k, trans_b, shared_b, epilogue, conv=None):
    """The shape's name as bench_gemm.c writes it (--match)."""
    if conv:
        c, h, w, o, kh, kw, stride, pad = conv
        return "%s/%s%s/n%d/c%d/h%d/w%d/o%d/k%dx%d/s%d/p%d/%s" % (
            suite, dt, "/" + label if label else "", batch, c, h, w, o, kh, kw, stride, pad, epilogue)
    return "%s/%s%s%s/m%d/n%d/k%d%s%s%s" % (
        suite, dt, "/" + label if label else "", "/b%d" % batch if batch > 1 else "", m, n, k,
        "/NT" if trans_b else "", "/shared" if shared_b and batch > 1 else "",
        "/" + epilogue if epilogue != "none" else "")


def torch_dtype(torch, name):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


class CudaTimer:
    """Median of `reps` CUDA-event-timed calls after `warmup` untimed ones,
    the L2 flushed before each timed call."""

    def __init__(self, torch, warmup=5, reps=30):
        self.torch = torch
        self.warmup, self.reps = warmup, reps
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or (50 << 20)
        self.flush = torch.empty(max(4 * l2, 256 << 20) // 4, dtype=torch.int32, device="cuda")
        self.device = props.name

    def time(self, fn):
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        ms = []
        for i in range(self.reps):
            self.flush.fill_(i + 1)
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ms.append(e0.elapsed_time(e1))
        ms.sort()
        n = len(ms)
        med = ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])
        return med, ms[0]


def need_cuda(torch, prog):
    """Exit 77 with one line when there is no usable GPU."""
    if not torch.cuda.is_available():
        print("%s: skipped, no GPU: torch %s sees no CUDA device" % (prog, torch.__version__))
        sys.exit(77)


def open_csv(path):
    return sys.stdout if path in (None, "-") else open(path, "w")
