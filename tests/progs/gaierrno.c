/*
 * gaierrno: getaddrinfo(NAME, "80") with errno set to 77 before the call.
 *   gaierrno NAME
 * Prints "result R errno E" (what a program that perror()s would show).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	struct addrinfo *res = NULL;
	errno = 77;
	int r = getaddrinfo(argv[1], "80", NULL, &res);
	int e = errno;
	printf("result %d errno %d\n", r, e);
	return 0;
}
