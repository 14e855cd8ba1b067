#!/usr/bin/env bash
# gpu_run_test.sh SRC BUILD OUT — mcir-gpu-run (scripts/gpu-run.sh) as far as
# a machine without a GPU can take it (docs/performance.md "A first GPU run"):
# 1. no GPU: run-info.txt (date, version, commit, "device: none") and exit
#    77 before any GPU work, the --tar archive written;
# 2. a fake nvidia-smi that lists a GPU, no CUDA driver: every step runs
#    and reports one PASS / FAIL / SKIP line (gpu-check fails its probe,
#    the benchmarks skip: no driver), within the budget, the archive holds
#    the logs and summary;
# 3. the norms step's selection holds the 27 f16 norms and 8 elementwise
#    chains (bench_norms --dry-run);
# 4. bench/gpu_run_summary.py puts known CSV figures side by side, the
#    elementwise rows apart from the norms, with their ratio to PyTorch.
set -uo pipefail
src=$1 build=$2 out=$3
run=$src/scripts/gpu-run.sh
rm -rf "$out"; mkdir -p "$out/bin"
fail=0
bad() { echo "FAIL $*"; fail=1; }

if ! command -v nvidia-smi >/dev/null 2>&1; then
  "$run" --out "$out/nogpu" --tar "$out/nogpu.tar.gz" "$build" >"$out/nogpu.log" 2>&1
  rc=$?
  [ $rc = 77 ] || bad "without a GPU: exit $rc, wanted 77: $(tail -3 "$out/nogpu.log")"
  grep -q '^mcir-gpu-run 20[0-9-]*T[0-9:]*Z$' "$out/nogpu/run-info.txt" || bad "run-info.txt has no date"
  grep -Eq '^mcir: +mcirc [0-9.]+, commit ([0-9a-f]{40}|unknown)' "$out/nogpu/run-info.txt" || bad "run-info.txt has no commit"
  grep -q '^device: *none' "$out/nogpu/run-info.txt" || bad "run-info.txt does not say there is no device"
  grep -q '^SKIP  gpu .*no GPU here' "$out/nogpu/steps.txt" || bad "no 'no GPU here' step"
  [ "$(tar tzf "$out/nogpu.tar.gz" | sort | tr '\n' ' ')" = "nogpu/run-info.txt nogpu/steps.txt nogpu/summary.txt " ] ||
    bad "the archive holds: $(tar tzf "$out/nogpu.tar.gz" | tr '\n' ' ')"
  [ -z "$(ls -A "$out/nogpu/kernel-cache")" ] || bad "kernels compiled before the GPU probe"
else
  echo "nvidia-smi is here: the no-GPU part is not checked"
fi

loader=$(ldconfig -p 2>/dev/null)
if ! grep -q 'libcuda\.so\.1 ' <<<"$loader"; then
  cat >"$out/bin/nvidia-smi" <<'EOS'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: Fake GPU (UUID: GPU-00000000)" ;;
  *query-gpu*) echo "Fake GPU, 580.00, 81559 MiB, 9.0" ;;
esac
EOS
  chmod +x "$out/bin/nvidia-smi"
  t0=$(date +%s)
  PATH=$out/bin:$PATH "$run" --budget 120 --out "$out/fake" --tar "$out/fake.tar.gz" "$build" >"$out/fake.log" 2>&1
  rc=$? secs=$(($(date +%s) - t0))
  echo "with a fake nvidia-smi: exit $rc in $secs s"
  [ $rc = 1 ] || bad "with a fake GPU and no driver: exit $rc, wanted 1 (gpu-check fails): $(tail -5 "$out/fake.log")"
  ((secs < 120)) || bad "took $secs s with --budget 120"
  grep -q '^device: *Fake GPU, 580.00, 81559 MiB, 9.0' "$out/fake/run-info.txt" || bad "the device is not recorded"
  for s in gpu-check attention_mcir attention_torch norms_mcir norms_torch gemm_mcir gemm_torch gemm_generated 'block(_mcir)?' profile_norm profile_gemm profile_attention; do
    grep -Eq "^(PASS|FAIL|SKIP) +$s " "$out/fake/steps.txt" || bad "no line for step $s: $(cat "$out/fake/steps.txt")"
  done
  grep -Eq '^FAIL +gpu-check +0 passed, 1 failed' "$out/fake/steps.txt" || bad "gpu-check did not fail its probe"
  grep -Eq '^SKIP +attention_mcir +bench_attention: skipped, no GPU' "$out/fake/steps.txt" || bad "bench_attention did not skip"
  grep -Eq '^SKIP +gemm_mcir +bench_gemm: skipped, no GPU' "$out/fake/steps.txt" || bad "bench_gemm did not skip"
  grep -Eq '^SKIP +norms_mcir +bench_norms: skipped, no GPU' "$out/fake/steps.txt" || bad "bench_norms did not skip"
  grep -Eqv '^(PASS|FAIL|SKIP) ' "$out/fake/steps.txt" && bad "a step line without a status"
  tail -1 "$out/fake.log" | grep -Eq '^0 passed, 1 failed, [0-9]+ skipped in [0-9]+ s of 120; everything in ' ||
    bad "the summary is not printed last: $(tail -1 "$out/fake.log")"
  # (the listing read whole first: grep -q in a pipe would SIGPIPE tar under pipefail)
  listing=$(tar tzf "$out/fake.tar.gz")
  grep -q '^fake/gpu-check/probe.log$' <<<"$listing" || bad "the archive lacks gpu-check's logs"
  grep -q 'kernel-cache' <<<"$listing" && bad "the archive holds the kernel cache"
else
  echo "a CUDA driver is installed: the fake-GPU part is not checked"
fi

# the norms step's selection: the 27 f16 norms and 8 elementwise chains,
# each of mcir's elementwise paths named (bench_norms --dry-run, no NVRTC)
sel=$(sed -n 's/^norms=(--match \(.*\))$/\1/p' "$run")
picked=$("$build/bench/bench_norms" --dry-run --compile 0 --match "$sel" 2>&1)
n_norm=$(grep -Ec '^(layernorm|rmsnorm|softmax),mcir,f16,.*,not run \(no GPU\)$' <<<"$picked")
n_ew=$(grep -Ec '^(swiglu|bias_gelu|add_cast),mcir_elementwise(\+elementwise)*,.*,not run \(no GPU\)$' <<<"$picked")
[ -n "$sel" ] && [ "$n_norm" = 27 ] && [ "$n_ew" = 8 ] ||
  bad "the norms step's selection '$sel': $n_norm norms and $n_ew elementwise shapes, wanted 27 and 8: $picked"

mkdir -p "$out/csv"
cat >"$out/csv/attention_gpu.csv" <<'EOS'
suite,impl,dtype,batch,heads,seq_q,seq_k,head_dim,causal,pipeline_s,compile_s,compile_cache,median_ms,min_ms,tflops,modelled_us,device,status
fa3,mcir,f16,32,16,512,512,128,0,0.01,0.5,cold,0.2000,0.1900,440.00,250.00,G,ok
fa3,mcir,f16,1,16,16384,16384,128,1,0.01,0.5,cold,,,,1600.00,G,launch failed
EOS
cat >"$out/csv/attention_torch.csv" <<'EOS'
suite,impl,dtype,batch,heads,seq_q,seq_k,head_dim,causal,pipeline_s,compile_s,compile_cache,median_ms,min_ms,tflops,device,status
fa3,sdpa_flash,f16,32,16,512,512,128,0,,,,0.1800,0.17,488.89,G,ok
fa3,sdpa_math,f16,32,16,512,512,128,0,,,,1.0,0.9,88.0,G,ok
EOS
cat >"$out/csv/norms_gpu.csv" <<'EOS'
op,impl,dtype,rows,width,median_ms,min_ms,gbps,copy_gbps,fraction_of_copy,device,status
layernorm,mcir,f16,32768,1024,0.0300,0.029,2800.0,3000.0,0.93,G,ok
swiglu,mcir_elementwise,bf16,4096,11008,0.1000,0.099,2705.4,3500.0,0.773,G,ok
add_cast,mcir_elementwise+elementwise,f32-bf16,4096,4096,0.1000,0.099,1677.7,3400.0,0.493,G,ok
bias_gelu,mcir_elementwise,f16,512,3072,,,,,,G,failed: x
EOS
cat >"$out/csv/norms_torch.csv" <<'EOS'
op,impl,dtype,rows,width,median_ms,min_ms,gbps,copy_gbps,fraction_of_copy,device,status
swiglu,torch_silu_mul,bf16,4096,11008,0.2000,0.199,1352.7,3450.0,0.392,G,ok
swiglu,torch_silu_mul,bf16,512,11008,0.0300,0.029,1127.3,2000.0,0.564,G,ok
bias_gelu,torch_add_gelu,f16,512,3072,0.0100,0.009,630.0,1500.0,0.420,G,ok
EOS
cat >"$out/csv/blocks_gpu.csv" <<'EOS'
graph,kernels,compile_s,pool_median_ms,pool_min_ms,lazy_median_ms,pool_peak_bytes,lazy_peak_bytes,eager_peak_bytes,device,status
gpt2_b8_s1024_f16,7,2.0,1.2500,1.2,1.3,104857600,110000000,200000000,G,ok
EOS
cat >"$out/csv/blocks_torch.csv" <<'EOS'
graph,impl,median_ms,min_ms,max_memory_allocated,max_memory_reserved,device,torch,status
gpt2_b8_s1024_f16,torch_eager,1.5000,1.4,209715200,230000000,G,2.11,ok
EOS
cat >"$out/csv/gemm_gpu.csv" <<'EOS'
suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,pipeline_s,compile_s,compile_cache,median_us,min_us,tflops,modelled_us,device,status
plain,mcir,plain/bf16/m8192/n8192/k8192,bf16,8192,8192,8192,1,NN,none,cuBLAS,1,0.002,0.2,cold,1400.00,1390.00,785.36,2647.29,G,ok
swiglu,mcir,swiglu/bf16/llama_down_proj/m8192/n4096/k11008/NT/silu_mul_prologue,bf16,8192,4096,11008,1,NT,silu_mul_prologue,matmul.mma,1,0.002,0.2,cold,,,,2014.87,G,GPU run failed: x
EOS
cat >"$out/csv/gemm_torch.csv" <<'EOS'
suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,pipeline_s,compile_s,compile_cache,median_us,min_us,tflops,modelled_us,device,status
plain,torch_eager,plain/bf16/m8192/n8192/k8192,bf16,8192,8192,8192,1,NN,none,matmul,,,,,1395.00,1390.00,788.20,,G,ok
swiglu,torch_eager,swiglu/bf16/llama_down_proj/m8192/n4096/k11008/NT/silu_mul_prologue,bf16,8192,4096,11008,1,NT,silu_mul_prologue,silu + mul + linear,,,,,1200.00,1100.00,615.70,,G,ok
swiglu,torch_gemm_only,swiglu/bf16/llama_down_proj/m8192/n4096/k11008/NT/silu_mul_prologue,bf16,8192,4096,11008,1,NT,silu_mul_prologue,gemm only,,,,,1000.00,990.00,738.80,,G,ok
EOS
cat >"$out/csv/gemm_generated.csv" <<'EOS'
suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,pipeline_s,compile_s,compile_cache,median_us,min_us,tflops,modelled_us,device,status
plain,mcir,plain/bf16/m8192/n8192/k8192,bf16,8192,8192,8192,1,NN,none,matmul.wgmma,1,0.002,0.2,cold,1800.00,1790.00,610.83,2647.29,G,ok
EOS
summary=$(python3 "$src/bench/gpu_run_summary.py" "$out/csv" 2>&1) || bad "gpu_run_summary.py failed: $summary"
grep -Eq 'fa3 f16 d128 q512 k512 full +440.0 +488.9 \(flash\) +0.90x +0.80x' <<<"$summary" || bad "attention row: $summary"
grep -q 'q16384 k16384 causal .*(launch failed)' <<<"$summary" || bad "a failed shape is not said"
grep -Eq 'layernorm f16 w1024 +2800 +– +3000 +0.93' <<<"$summary" || bad "norms row: $summary"
grep -Eq 'swiglu bf16 T4096 w11008 +2705 +\(elementwise\) +1353 +3500 +0.77 +0.39 +2.00x$' <<<"$summary" ||
  bad "elementwise row: $summary"
grep -Eq 'add_cast f32-bf16 T4096 w4096 +1678 +\(elementwise\+elementwise\) +– +3400 +0.49 +– +–$' <<<"$summary" ||
  bad "an elementwise row without PyTorch's figure: $summary"
grep -Eq 'bias_gelu f16 T512 w3072 +– +\(elementwise\) +630 +– +– +0.42 +– +\(failed: x\)' <<<"$summary" ||
  bad "a failed elementwise shape is not said: $summary"
grep -q 'swiglu.*T512' <<<"$summary" && bad "a PyTorch-only elementwise shape is listed: $summary"
grep -Eq '^  (swiglu|add_cast|bias_gelu) .* w[0-9]+ +[0-9–]+ +[0-9–]+ +[0-9–]+ +[0-9.–]+$' <<<"$summary" &&
  bad "an elementwise row in the norms' table: $summary"
grep -Eq 'plain/bf16/m8192/n8192/k8192 +785.4 +\(cuBLAS\) +610.8 +788.2 +– +1.00x' <<<"$summary" || bad "gemm row: $summary"
grep -Eq 'llama_down_proj/.* +– +\(matmul.mma\) +– +615.7 +738.8 +– +\(GPU run failed: x\)' <<<"$summary" ||
  bad "a failed GEMM shape is not said: $summary"
grep -q 'mcir 1.250 ms (100.0 MiB)' <<<"$summary" && grep -q 'torch_eager 1.500 ms (200.0 MiB)' <<<"$summary" ||
  bad "block rows: $summary"
[ $fail = 0 ] && echo ok
exit $fail
