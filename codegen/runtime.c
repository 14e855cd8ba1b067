#include "codegen/codegen-impl.h"
