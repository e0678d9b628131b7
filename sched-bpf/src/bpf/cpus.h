/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * Finding CPUs on a node (idle ones to claim or to wake), taking a task from
 * another node's queue after the steal delay, and calling a runaway home.
 * Included once, by numalab_sched.bpf.c, after state.h.
 */
#ifndef NUMALAB_CPUS_H
#define NUMALAB_CPUS_H

static s32 claim_idle_in_node(struct task_struct *p, s32 n, s32 prev_cpu)
{
	u32 i, first, last;

	if (!valid_node(n))
		return -1;
	if (node_of_cpu(prev_cpu) == n && bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu))
		return prev_cpu;
	first = nfirst(n);
	last = nfirst(n + 1);
	bpf_for(i, first, last) {
		s32 cpu;

		if (i >= NL_MAX_CPUS)
			break;
		cpu = ncpu(i);
		if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr) && scx_bpf_test_and_clear_cpu_idle(cpu))
			return cpu;
	}
	return -1;
}

/* Some CPU of node n that p may use (prev_cpu when it is one). */
static s32 any_cpu_in_node(struct task_struct *p, s32 n, s32 prev_cpu)
{
	s32 cpu;

	if (node_of_cpu(prev_cpu) == n)
		return prev_cpu;
	cpu = first_allowed_cpu(p, n);
	return cpu >= 0 ? cpu : prev_cpu;
}

/* An idle CPU of node n, not claimed (it may be taken meanwhile); -1 when none. */
static s32 idle_cpu_in_node(s32 n)
{
	const struct cpumask *idle;
	u32 i, first, last;
	s32 found = -1;

	if (!valid_node(n))
		return -1;
	idle = scx_bpf_get_idle_cpumask();
	first = nfirst(n);
	last = nfirst(n + 1);
	bpf_for(i, first, last) {
		if (i >= NL_MAX_CPUS)
			break;
		if (bpf_cpumask_test_cpu(ncpu(i), idle)) {
			found = ncpu(i);
			break;
		}
	}
	scx_bpf_put_idle_cpumask(idle);
	return found;
}

static __always_inline bool has_idle_in_node(s32 n)
{
	return idle_cpu_in_node(n) >= 0;
}

/* Wakes one idle CPU of node n (without claiming it); false when none is idle. */
static bool kick_idle_in_node(s32 n)
{
	s32 cpu = idle_cpu_in_node(n);

	if (cpu < 0)
		return false;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * Takes one task from node `from`'s queue for this CPU (of node `to`):
 * a task without a homenode at once, a homed one once it has waited the
 * distance delay. Iterates in vtime order, at most 8 tasks deep.
 */
static bool steal_from(s32 from, s32 to, u64 now)
{
	struct task_struct *p;
	u64 delay = 0;
	u32 depth = 0;

	if (!valid_node(from) || !valid_node(to))
		return false;
	if (scx_bpf_dsq_nr_queued(from) <= 0)
		return false;
	if (MECH(STEAL_DELAY))
		delay = steal_delay(from, to);
	bpf_for_each(scx_dsq, p, from, 0) {
		struct task_ctx *tctx;
		bool homed;

		if (++depth > 8)
			break;
		if (!bpf_cpumask_test_cpu(bpf_get_smp_processor_id(), p->cpus_ptr))
			continue;
		tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
		if (!tctx)
			continue;
		homed = valid_node(tctx->home) && tctx->home == from;
		/*
		 * Homed: it waited the delay, or its home has been saturated that
		 * long; and the move evens the two nodes' load out, now and on
		 * average.
		 */
		if (homed && ((now - tctx->enq_at < delay &&
			       (!backlog_of(from) || now - backlog_of(from) < delay)) ||
			      !evens_out(from, to) ||
			      (MECH(STEAL_DELAY) && !evens_out_on_average(from, to))))
			continue;
		if (!nl_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
			continue;
		if (homed) {
			struct nl_node_acct *victim = nacct(from), *thief = nacct(to);
			struct nl_task_acct *ta = task_acct_of(p, from);
			bool by_backlog = now - tctx->enq_at < delay;
			u32 d = dist(from, to);

			if (victim) {
				victim->stolen_from++;
				victim->stolen_backlog += by_backlog;
			}
			if (thief)
				thief->stole++;
			if (ta) {
				ta->stolen++;
				ta->stolen_backlog += by_backlog;
			}
			if (d < 256)
				__sync_fetch_and_add(&stats.steals_by_distance[d], 1);
		} else {
			struct nl_node_acct *thief = nacct(to);

			if (thief)
				thief->stole_free++;
		}
		return true;
	}
	return false;
}

/* Preempts one task homed on node n that runs on another node; true if one was found. */
static bool reattract_to(s32 n)
{
	u32 cpu;

	bpf_for(cpu, 0, cfg.nr_cpus) {
		if (cpu >= NL_MAX_CPUS)
			break;
		s32 *rh = running_home_of(cpu);

		if (rh && *rh == n && node_of_cpu(cpu) != n) {
			struct nl_node_acct *na = nacct(n);

			/* Once per runaway: it stops being a runaway when it stops running. */
			*rh = -1;
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
			if (na)
				na->reattract_kicks++;
			return true;
		}
	}
	return false;
}

#endif /* NUMALAB_CPUS_H */
