/*
 * jumptwice: a blocking connect() to 127.0.0.1:PORT (dead: with the shim,
 * retried) interrupted by two signals. The first handler uses setjmp and
 * longjmp inside itself (the connect goes on); the second leaves the
 * connect with siglongjmp.
 *   jumptwice PORT
 * Prints "inner" after the first handler, "left" once out of connect(),
 * then waits for stdin to close.
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static sigjmp_buf out;
static volatile sig_atomic_t n;

static void handler(int sig)
{
	(void)sig;
	if (++n == 1) {
		jmp_buf inner;
		if (setjmp(inner) == 0)
			longjmp(inner, 1); /* stays inside the handler */
		(void)!write(1, "inner\n", 6);
		return;
	}
	siglongjmp(out, 1);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_RESTART};
	sigaction(SIGUSR1, &sa, NULL);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (sigsetjmp(out, 1) == 0) {
		printf("ready\n");
		connect(fd, (struct sockaddr *)&a, sizeof a);
		printf("returned\n");
		return 1;
	}
	printf("left\n");
	char b[64];
	while (read(0, b, sizeof b) > 0)
		;
	return 0;
}
