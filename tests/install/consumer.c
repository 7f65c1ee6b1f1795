/* A program outside the tree, built against an installed softub through pkg-config. */
#include <softub/softub.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(ub_version(), UB_VERSION_STRING) != 0)
        return 1;
    printf("softub %s installed: %s\n", ub_version(), ub_strerror(UB_EUNREACH));
    return 0;
}
