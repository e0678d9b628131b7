/*
 * pnidctl: call PR_PREFERRED_NID (patches/linux-6.12) directly, for the lab
 * test tests/lab_pnid.rs. numalab only ever sets its own node through
 * validated arguments; this checks the kernel side itself: invalid nodes,
 * other pids, and what fork, threads and exec do with a forced node.
 *
 *   pnidctl get [PID]            print the forced node of PID (0 = self)
 *   pnidctl set NID [PID]        force NID (-1 clears) on PID (0 = self)
 *   pnidctl exec NID CMD [ARG]   force NID on self, then exec CMD
 *   pnidctl inherit NID          force NID on self, then print what a
 *                                fork() child and a new thread read back
 *
 * Prints "ok", the value, or "error: NAME (errno N)"; exit 0 on success,
 * 1 when the prctl failed, 2 on bad usage. Built static by the test
 * (gcc -static), so it runs in the lab guest without libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PR_PREFERRED_NID 101
#define PR_PREFERRED_NID_GET 0
#define PR_PREFERRED_NID_SET 1

static int get_nid(long pid, int *out)
{
	*out = -100; /* never a node nor -1: shows a GET that wrote nothing */
	return prctl(PR_PREFERRED_NID, PR_PREFERRED_NID_GET, 0UL,
		     (unsigned long)pid, (unsigned long)out);
}

static int set_nid(long nid, long pid)
{
	return prctl(PR_PREFERRED_NID, PR_PREFERRED_NID_SET,
		     (unsigned long)nid, (unsigned long)pid, 0UL);
}

static int report_error(void)
{
	int e = errno;

	printf("error: %s (errno %d)\n",
	       e == EINVAL ? "EINVAL" : e == ESRCH ? "ESRCH" :
	       e == EPERM ? "EPERM" : strerrorname_np(e) ? strerrorname_np(e) : "?",
	       e);
	return 1;
}

static long number(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end) {
		fprintf(stderr, "pnidctl: '%s' is not a number\n", s);
		exit(2);
	}
	return v;
}

static void *thread_get(void *arg)
{
	int *out = arg;

	if (get_nid(0, out))
		*out = -200 - errno;
	return NULL;
}

int main(int argc, char **argv)
{
	int v;

	if (argc >= 2 && !strcmp(argv[1], "get") && argc <= 3) {
		if (get_nid(argc == 3 ? number(argv[2]) : 0, &v))
			return report_error();
		printf("%d\n", v);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "set") && argc <= 4) {
		if (set_nid(number(argv[2]), argc == 4 ? number(argv[3]) : 0))
			return report_error();
		printf("ok\n");
		return 0;
	}
	/*
	 * set32: the node as a C caller that passes an int through prctl()'s
	 * variadic arguments does: 32 bits, zero-extended, so -1 arrives as
	 * 0x00000000ffffffff. The kernel must read it as an int.
	 */
	if (argc >= 3 && !strcmp(argv[1], "set32") && argc <= 4) {
		unsigned int nid32 = (unsigned int)(int)number(argv[2]);

		if (prctl(PR_PREFERRED_NID, PR_PREFERRED_NID_SET, (unsigned long)nid32,
			  argc == 4 ? (unsigned long)number(argv[3]) : 0UL, 0UL))
			return report_error();
		printf("ok\n");
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "exec")) {
		if (set_nid(number(argv[2]), 0))
			return report_error();
		fflush(stdout);
		execvp(argv[3], argv + 3);
		perror("pnidctl: exec");
		return 1;
	}
	if (argc == 3 && !strcmp(argv[1], "inherit")) {
		pthread_t t;
		pid_t child;
		int status;

		if (set_nid(number(argv[2]), 0))
			return report_error();
		if (get_nid(0, &v))
			return report_error();
		printf("self=%d\n", v);
		fflush(stdout);
		child = fork(); /* a new address space */
		if (child == 0) {
			if (get_nid(0, &v))
				_exit(report_error());
			printf("fork=%d\n", v);
			fflush(stdout);
			_exit(0);
		}
		if (child < 0 || waitpid(child, &status, 0) != child) {
			perror("pnidctl: fork");
			return 1;
		}
		if (pthread_create(&t, NULL, thread_get, &v) || pthread_join(t, NULL)) {
			fprintf(stderr, "pnidctl: pthread failed\n");
			return 1;
		}
		printf("thread=%d\n", v);
		return 0;
	}
	fprintf(stderr, "usage: pnidctl get [PID] | set NID [PID] | set32 NID [PID] | exec NID CMD [ARG]... | inherit NID\n");
	return 2;
}
