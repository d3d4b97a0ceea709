/*
 * lookupjump: a getaddrinfo() left the way real programs leave one.
 *   lookupjump jump NAME    SIGUSR1 (sent by the test) makes the handler
 *                           siglongjmp out of getaddrinfo(NAME, "80"), as
 *                           wget --dns-timeout does with SIGALRM
 *   lookupjump cancel NAME  a thread's getaddrinfo(NAME, "80") is ended by
 *                           pthread_cancel on SIGUSR1
 * Prints "ready" at start, then "left" once the lookup was left, then waits
 * for its stdin to close (the process stays alive, so anything it still
 * held would still be held). Exit 0; 1 if the lookup returned instead.
 */
#include <netdb.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static sigjmp_buf env;
static const char *name;
static volatile sig_atomic_t cancel_now;

static void jump_out(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void note_cancel(int sig)
{
	(void)sig;
	cancel_now = 1;
}

static void *lookup(void *arg)
{
	(void)arg;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int r = getaddrinfo(name, "80", &hints, &res);
	printf("returned %d\n", r);
	fflush(stdout);
	return NULL;
}

static void wait_stdin(void)
{
	char b[64];
	while (read(0, b, sizeof b) > 0)
		;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	name = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "jump")) {
		signal(SIGUSR1, jump_out);
		if (sigsetjmp(env, 1) == 0) {
			printf("ready\n");
			lookup(NULL);
			return 1;
		}
		printf("left\n");
	} else {
		pthread_t t;
		signal(SIGUSR1, note_cancel);
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &s, NULL); /* the thread too: main takes it */
		pthread_create(&t, NULL, lookup, NULL);
		printf("ready\n");
		int sig;
		sigwait(&s, &sig);
		pthread_cancel(t);
		void *ret;
		pthread_join(t, &ret);
		if (ret != PTHREAD_CANCELED)
			return 1;
		printf("left\n");
	}
	wait_stdin();
	return 0;
}
