/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * pingpong: two threads pass one byte back and forth through two pipes for
 * SECONDS and print the round trips per second. Every round trip is two
 * sleeps and two wake-ups and no memory traffic to speak of: a measure of a
 * scheduler's wake-up path, not of NUMA (bench/sched_lab.sh cost).
 *
 *   pingpong SECONDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];

static void *echo(void *arg)
{
	char c;

	(void)arg;
	while (read(ab[0], &c, 1) == 1)
		if (write(ba[1], &c, 1) != 1)
			break;
	return NULL;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, start, t;
	unsigned long n = 0;
	pthread_t th;
	char c = 'x';

	if (secs <= 0 || pipe(ab) || pipe(ba) || pthread_create(&th, NULL, echo, NULL)) {
		fprintf(stderr, "usage: pingpong SECONDS\n");
		return 2;
	}
	start = now();
	do {
		for (int i = 0; i < 256; i++) {
			if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
				return 1;
		}
		n += 256;
		t = now();
	} while (t - start < secs);
	printf("%lu round trips in %.2f s: %.0f per second\n", n, t - start, n / (t - start));
	return 0;
}
