#include "dest.h"

#include "log.h"

#include <stdint.h>

void bs_dest_line(struct bs_line *l, const struct sockaddr *addr, socklen_t len,
		  const char *event, int err)
{
	char name[128] = "?";
	if (addr)
		bs_addr_format(addr, len, name, sizeof name);
	bs_line_start(l);
	bs_line_event(l, event);
	bs_line_fields(l, name, 0, UINT64_MAX, err);
	bs_line_str(l, bs_dest_is_name(addr) ? "resolve " : "connect ");
	bs_line_str(l, name);
	bs_line_str(l, ": ");
}
