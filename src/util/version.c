/* version.c: the library's version string. SPECDEC_VERSION_STRING comes from CMake's
 * project(VERSION), the one place the version is written. */
#include "specdec.h"

#ifndef SPECDEC_VERSION_STRING
#error "SPECDEC_VERSION_STRING is defined by the build (CMakeLists.txt, project VERSION)"
#endif

const char *specdec_version(void) { return SPECDEC_VERSION_STRING; }
