/* Common includes for the cmocka unit tests. */
#ifndef BS_UNIT_H
#define BS_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#endif
