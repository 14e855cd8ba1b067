/*
 * compile.h — the emulated device's module builder: a generated kernel's
 * CUDA C, with the launchers codegen appends under MC_EMULATE, built by the
 * host C++ compiler against emu/cuda_emu.h into a shared object that the
 * emulated driver's cuModuleLoadData loads (emu/device.c). Code generation
 * (codegen/codegen.c) calls it as it calls NVRTC for the GPU; it needs
 * nothing of the device or the runtime.
 *
 *     char why[256];
 *     if (!mcir_emu_available(why, sizeof why)) return fail(why);
 *     unsigned char *image; size_t size;
 *     if (!mcir_emu_compile_unit("k", source, &image, &size, why, sizeof why)) ...
 */
#ifndef MCIR_EMU_COMPILE_H
#define MCIR_EMU_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

/* A host C++ compiler the modules can be built with ($CXX, else c++);
 * false and why otherwise. */
bool mcir_emu_available(char *why, size_t n);

/* The part of the kernel-cache key that names the emulator build: the
 * compiler's version line and a hash of the emulator's headers
 * (emu/cuda_emu.h, cuda_emu_sm80.h, cuda_emu_sm90.h) (and the sanitizer
 * flags where this process is instrumented). */
const char *mcir_emu_version(void);

/* Builds one compile unit (CUDA C with the launchers codegen appends under
 * MC_EMULATE) into a module image for cuModuleLoadData: malloc'd, *size
 * bytes. False with the compiler's first lines in why. */
bool mcir_emu_compile_unit(const char *name, const char *source, unsigned char **image, size_t *size, char *why,
                           size_t n);

#endif /* MCIR_EMU_COMPILE_H */
