#include "codegen/codegen-impl.h"
bool cg_gen_attention(cg_kernel *k, const mcir_target *t, mcir_diag *d) { (void)k; (void)t; (void)d; return false; }
