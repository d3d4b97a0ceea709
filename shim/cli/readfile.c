/* readfile: the config file through libc. See readfile.h. */
#include "readfile.h"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

long bs_read_file_libc(void *ctx, const char *path, char *buf, size_t cap, const char **why)
{
	(void)ctx;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		*why = bs_config_cannot("open file", errno);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		/* /dev/null (character device 1:3) is empty: no file, quietly */
		int null = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
			   major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
		close(fd);
		if (null)
			return 0;
		*why = "not a regular file";
		return -1;
	}
	size_t n = 0;
	ssize_t r = 0;
	while (n < cap && ((r = read(fd, buf + n, cap - n)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0)
			n += (size_t)r;
	int err = errno;
	close(fd);
	if (r < 0) {
		*why = bs_config_cannot("read file", err);
		return -1;
	}
	return (long)n;
}
