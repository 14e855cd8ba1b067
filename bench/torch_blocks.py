#!/usr/bin/python3
"""torch_blocks.py — the GPT-2 and Llama blocks of bench/gen_blocks.py in
PyTorch on the GPU, written as modules are (torch_cpu.py's gpt2_module /
llama_module, same weights by name, mcir's seeded values), in the graph's
dtype: latency of eager and of torch.compile (when this torch has it),
median of --reps CUDA-event-timed runs after warm-up (no L2 flush, like
bench_blocks), and torch.cuda.max_memory_allocated / max_memory_reserved
of one run after reset_peak_memory_stats (weights and input included).

    /usr/bin/python3 bench/torch_blocks.py [--reps 20] [--csv FILE] graph.json...

Exits 77 with one line when torch sees no GPU.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_cpu  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--csv", default=None)
    ap.add_argument("graphs", nargs="+")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("torch_blocks: skipped, no GPU: torch %s sees no CUDA device" % torch.__version__)
        return 77
    out = sys.stdout if a.csv in (None, "-") else open(a.csv, "w")
    print("graph,impl,median_ms,min_ms,max_memory_allocated,max_memory_reserved,device,torch,status", file=out)
    dev = torch.cuda.get_device_properties(0).name
    for path in a.graphs:
        name = os.path.basename(os.path.dirname(path))
        g, leaves = torch_cpu.load(torch, path, {})
        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[g["inputs"][0]["dtype"]]
        leaves = {k: v.to("cuda", dt) for k, v in leaves.items()}
        x = leaves.pop("x")
        W = leaves
        block = (torch_cpu.gpt2_module(torch, W, W["c.causal_mask"]) if name.startswith("gpt2")
                 else torch_cpu.llama_module(torch, W))
        impls = [("torch_eager", block)]
        if hasattr(torch, "compile"):
            impls.append(("torch_compile", torch.compile(block)))
        for impl, fn in impls:
            status, cells = "ok", [""] * 4
            try:
                with torch.no_grad():
                    for _ in range(a.warmup):
                        fn(x)
                    torch.cuda.synchronize()
                    ms = []
                    for _ in range(a.reps):
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn(x)
                        e1.record()
                        e1.synchronize()
                        ms.append(e0.elapsed_time(e1))
                    ms.sort()
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                    fn(x)
                    torch.cuda.synchronize()
                    cells = ["%.4f" % ms[len(ms) // 2], "%.4f" % ms[0], str(torch.cuda.max_memory_allocated()),
                             str(torch.cuda.max_memory_reserved())]
            except RuntimeError as e:
                status = "failed: " + str(e).split("\n")[0][:120].replace(",", ";")
            print(",".join([name, impl] + cells + [dev, torch.__version__, status]), file=out, flush=True)
        del W, x, leaves
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
