/* ub_strerror / ub_errname: the descriptions of UB_ERROR_LIST. */
#include <softub/softub.h>
#include "core/compiler.h"

UB_EXPORT const char *ub_strerror(int err)
{
    switch (err) {
#define UB__ERR_DESC(name, value, desc) \
    case value:                         \
        return desc;
        UB_ERROR_LIST(UB__ERR_DESC)
#undef UB__ERR_DESC
    default:
        return "unknown error";
    }
}

UB_EXPORT const char *ub_errname(int err)
{
    switch (err) {
#define UB__ERR_NAME(name, value, desc) \
    case value:                         \
        return #name;
        UB_ERROR_LIST(UB__ERR_NAME)
#undef UB__ERR_NAME
    default:
        return 0;
    }
}

UB_EXPORT const char *ub_version(void)
{
    return UB_VERSION_STRING;
}
