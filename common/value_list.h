/* Internal half of mixrt/sequence.h: freeing the list behind a sequence or optional value
 * (used by mx_tensor_release). */
#ifndef MIXRT_COMMON_VALUE_LIST_H
#define MIXRT_COMMON_VALUE_LIST_H

/* Frees an mx_value_list and every item it holds. NULL is a no-op. */
void mx__value_list_free(void *list);

#endif /* MIXRT_COMMON_VALUE_LIST_H */
