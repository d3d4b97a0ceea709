/* stamp: counter readings to nanoseconds. See stamp.h. */
#include "stamp.h"

uint64_t bs_stamp_ns(uint64_t stamp, struct bs_stamp_pair ref, struct bs_stamp_pair now)
{
	if (!(stamp & BS_STAMP_TICKS))
		return stamp;
	uint64_t ticks = stamp & ~BS_STAMP_TICKS;
	if (now.ticks <= ref.ticks || now.ns <= ref.ns)
		return now.ns; /* no interval to measure the rate over */
	if (ticks < ref.ticks)
		ticks = ref.ticks;
	if (ticks > now.ticks)
		ticks = now.ticks;
	unsigned __int128 ago = (unsigned __int128)(now.ticks - ticks) * (now.ns - ref.ns) /
				(now.ticks - ref.ticks);
	return now.ns - (uint64_t)ago; /* ago <= now.ns - ref.ns */
}
