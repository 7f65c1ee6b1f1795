#include <stdio.h>
#include <softub/softub.h>
int main(void)
{
    printf("softub %s\n", ub_version());
    return 0;
}
