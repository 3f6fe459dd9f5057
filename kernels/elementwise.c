/* The elementwise kernel group: the NULL-terminated list the kernel registry reads. The
 * kernels live in elementwise_unary.c (unary math, Gelu, Clip), elementwise_binary.c (binary
 * arithmetic, comparisons, logic, Sum/Mean/Max/Min), elementwise_cast.c (Cast, Where) and share
 * the broadcast walker of elementwise_bcast.c. */
#include "kernels/elementwise_impl.h"
#include "kernels/groups.h"

#define MX__EW_ENTRY_(name) &mx__kdef_##name,
const mx_kernel_def *const mx__kernels_elementwise[] = {MX__EW_KERNEL_LIST(MX__EW_ENTRY_) NULL};
#undef MX__EW_ENTRY_
