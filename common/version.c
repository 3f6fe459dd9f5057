/* mx_version(): the version of the library in use, from the configured mixrt/version.h. */
#include "mixrt/version.h"

const char *mx_version(void) { return MIXRT_VERSION; }

int mx_version_number(void) { return MIXRT_VERSION_NUMBER; }
