// Grid-stride kernels for the SASS audit's parser tests (tests/data/sass/):
// nvcc -cubin -arch=sm_90 -O3, then nvdisasm -c.
extern "C" __global__ void div_f32(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    c[i] = a[i] / b[i];
}
extern "C" __global__ void rcp_f32(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long n) {
#pragma unroll 1
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    c[i] = a[i] * __frcp_rn(b[i]) + rsqrtf(b[i]);
}
extern "C" __global__ void scale_v4(const float4* __restrict__ a, float4* __restrict__ c, long n) {
#pragma unroll 1
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float4 v = a[i]; v.x *= 2.f; v.y *= 2.f; v.z *= 2.f; v.w *= 2.f; c[i] = v; }
}
extern "C" __global__ void scale_f32(const float* __restrict__ a, float* __restrict__ c, long n) {
#pragma unroll 1
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    c[i] = a[i] * 2.f;
}
