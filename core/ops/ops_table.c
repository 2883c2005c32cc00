/* The op table, generated from ops.def. */
#include "minigrad/op.h"
#include "minigrad/ops.h"

#define MG_OP(name) extern const mg_op_def mg_op_def_##name;
#include "ops.def"
#undef MG_OP

const mg_op_def *const mg_op_table[] = {
#define MG_OP(name) &mg_op_def_##name,
#include "ops.def"
#undef MG_OP
};

const int mg_op_count = (int)(sizeof mg_op_table / sizeof mg_op_table[0]);
