/* units: time is counted in nanoseconds (uint64_t) throughout. */
#ifndef BS_UNITS_H
#define BS_UNITS_H

#define BS_NS_PER_MS 1000000ull
#define BS_NS_PER_SEC 1000000000ull

#endif
