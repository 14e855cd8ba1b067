#include <stdio.h>
#include "codegen/codegen.h"
int main(void) { char why[256]; if (!mcir_gpu_available(why, sizeof why)) { printf("skip: %s\n", why); return 77; } return 0; }
