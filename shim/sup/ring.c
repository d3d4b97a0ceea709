/* ring: see ring.h. The raw system calls: no liburing needed. */
#include "ring.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <linux/time_types.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The address and the limit of a connect live here until it completes. */
struct slot {
	uint64_t tag;
	int busy;
	struct sockaddr_storage addr;
	struct __kernel_timespec limit;
};

struct bs_ring {
	int fd;
	unsigned sq_entries;
	_Atomic unsigned *sq_head, *sq_tail, *cq_head, *cq_tail;
	unsigned *sq_mask, *cq_mask, *sq_array;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq_map, *cq_map;
	size_t sq_len, cq_len, sqe_len;
	unsigned nslots;
	struct slot *slots;
};

/* Completions of the linked timeouts and cancels carry this bit. */
#define AUX (1ull << 63)

static void *map(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, off);
	return p == MAP_FAILED ? NULL : p;
}

static int map_rings(struct bs_ring *r, const struct io_uring_params *p)
{
	r->sq_len = p->sq_off.array + p->sq_entries * sizeof(unsigned);
	r->cq_len = p->cq_off.cqes + p->cq_entries * sizeof(struct io_uring_cqe);
	r->sqe_len = p->sq_entries * sizeof(struct io_uring_sqe);
	char *sq = map(r->fd, r->sq_len, IORING_OFF_SQ_RING);
	char *cq = map(r->fd, r->cq_len, IORING_OFF_CQ_RING);
	r->sqes = map(r->fd, r->sqe_len, IORING_OFF_SQES);
	r->sq_map = sq, r->cq_map = cq;
	if (!sq || !cq || !r->sqes)
		return -1;
	r->sq_head = (_Atomic unsigned *)(sq + p->sq_off.head);
	r->sq_tail = (_Atomic unsigned *)(sq + p->sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p->sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p->sq_off.array);
	r->cq_head = (_Atomic unsigned *)(cq + p->cq_off.head);
	r->cq_tail = (_Atomic unsigned *)(cq + p->cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p->cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p->cq_off.cqes);
	return 0;
}

static void ring_free(struct bs_ring *r)
{
	if (r->sq_map)
		munmap(r->sq_map, r->sq_len);
	if (r->cq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sqes)
		munmap(r->sqes, r->sqe_len);
	if (r->fd >= 0)
		close(r->fd);
	free(r->slots);
	free(r);
}

struct bs_ring *bs_ring_open(unsigned depth)
{
	struct io_uring_params p = {0};
	struct bs_ring *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->nslots = depth;
	r->slots = calloc(depth, sizeof *r->slots);
	/* a connect takes two entries (and a cancel one) */
	r->fd = (int)syscall(SYS_io_uring_setup, 4 * depth, &p);
	if (!r->slots || r->fd < 0 || map_rings(r, &p) < 0) {
		int e = errno;
		ring_free(r);
		errno = e;
		return NULL;
	}
	r->sq_entries = p.sq_entries;
	return r;
}

int bs_ring_fd(const struct bs_ring *r)
{
	return r->fd;
}

/* The next free submission entry, zeroed; NULL if the ring is full. */
static struct io_uring_sqe *next_sqe(struct bs_ring *r, unsigned *tail)
{
	unsigned head = atomic_load_explicit(r->sq_head, memory_order_acquire);
	if (*tail - head >= r->sq_entries)
		return NULL;
	unsigned i = *tail & *r->sq_mask;
	r->sq_array[i] = i;
	(*tail)++;
	memset(&r->sqes[i], 0, sizeof r->sqes[i]);
	return &r->sqes[i];
}

static int submit(struct bs_ring *r, unsigned tail, unsigned n)
{
	atomic_store_explicit(r->sq_tail, tail, memory_order_release);
	long got = syscall(SYS_io_uring_enter, r->fd, n, 0, 0, NULL, 0);
	return got == (long)n ? 0 : got < 0 ? -errno : -EIO;
}

int bs_ring_connect(struct bs_ring *r, uint64_t tag, int fd, const struct sockaddr *addr,
		    socklen_t len, uint64_t limit_ns)
{
	struct slot *s = NULL;
	for (unsigned i = 0; i < r->nslots && !s; i++)
		if (!r->slots[i].busy)
			s = &r->slots[i];
	if (!s || len > sizeof s->addr || (tag & AUX))
		return -EBUSY;
	unsigned tail = atomic_load_explicit(r->sq_tail, memory_order_relaxed);
	struct io_uring_sqe *c = next_sqe(r, &tail);
	struct io_uring_sqe *t = limit_ns ? next_sqe(r, &tail) : NULL;
	if (!c || (limit_ns && !t))
		return -EBUSY;
	memcpy(&s->addr, addr, len);
	s->tag = tag, s->busy = 1;
	c->opcode = IORING_OP_CONNECT;
	c->fd = fd;
	c->addr = (uint64_t)(uintptr_t)&s->addr;
	c->off = len;
	c->user_data = tag;
	if (t) {
		c->flags = IOSQE_IO_LINK;
		s->limit.tv_sec = (long long)(limit_ns / 1000000000u);
		s->limit.tv_nsec = (long long)(limit_ns % 1000000000u);
		t->opcode = IORING_OP_LINK_TIMEOUT;
		t->fd = -1;
		t->addr = (uint64_t)(uintptr_t)&s->limit;
		t->len = 1;
		t->user_data = tag | AUX;
	}
	int e = submit(r, tail, t ? 2 : 1);
	if (e)
		s->busy = 0;
	return e;
}

int bs_ring_cancel(struct bs_ring *r, uint64_t tag)
{
	unsigned tail = atomic_load_explicit(r->sq_tail, memory_order_relaxed);
	struct io_uring_sqe *c = next_sqe(r, &tail);
	if (!c)
		return -EBUSY;
	c->opcode = IORING_OP_ASYNC_CANCEL;
	c->fd = -1;
	c->addr = tag;
	c->user_data = tag | AUX;
	return submit(r, tail, 1);
}

int bs_ring_reap(struct bs_ring *r, uint64_t *tag, int *res)
{
	for (;;) {
		unsigned head = atomic_load_explicit(r->cq_head, memory_order_relaxed);
		if (head == atomic_load_explicit(r->cq_tail, memory_order_acquire))
			return 0;
		struct io_uring_cqe *e = &r->cqes[head & *r->cq_mask];
		uint64_t t = e->user_data;
		int v = e->res;
		atomic_store_explicit(r->cq_head, head + 1, memory_order_release);
		if (t & AUX)
			continue;
		for (unsigned i = 0; i < r->nslots; i++)
			if (r->slots[i].busy && r->slots[i].tag == t)
				r->slots[i].busy = 0;
		*tag = t, *res = v;
		return 1;
	}
}
