/* Time shorthands for the unit tests, in the shim's unit (nanoseconds). */
#ifndef BS_UNIT_TIME_H
#define BS_UNIT_TIME_H

#include "units.h"

#define MS BS_NS_PER_MS
#define SEC BS_NS_PER_SEC

#endif
