/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * One name for each sched_ext call whose name changed between kernels, and
 * the struct_ops program macros. 6.12 has scx_bpf_dispatch[_vtime](),
 * scx_bpf_consume() and scx_bpf_dispatch_from_dsq(); 6.13 renamed them
 * scx_bpf_dsq_insert[_vtime](), scx_bpf_dsq_move_to_local() and
 * scx_bpf_dsq_move(), and later kernels drop the old names. The kfuncs are
 * weak (kernel.h): the one the running kernel lacks resolves to 0, and the
 * verifier removes the branch that would call it.
 */
#ifndef NUMALAB_COMPAT_H
#define NUMALAB_COMPAT_H

#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

#define BPF_STRUCT_OPS(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, ##args)
#define BPF_STRUCT_OPS_SLEEPABLE(name, args...) SEC("struct_ops.s/" #name) BPF_PROG(name, ##args)

/* The iterator of the enclosing bpf_for_each(scx_dsq, ...). */
#define BPF_FOR_EACH_ITER (&___it)

static __always_inline void nl_insert(struct task_struct *p, u64 dsq, u64 slice, u64 flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert))
		scx_bpf_dsq_insert(p, dsq, slice, flags);
	else
		scx_bpf_dispatch(p, dsq, slice, flags);
}

static __always_inline void nl_insert_vtime(struct task_struct *p, u64 dsq, u64 slice, u64 vtime,
					    u64 flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert_vtime))
		scx_bpf_dsq_insert_vtime(p, dsq, slice, vtime, flags);
	else
		scx_bpf_dispatch_vtime(p, dsq, slice, vtime, flags);
}

static __always_inline bool nl_move_to_local(u64 dsq)
{
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local))
		return scx_bpf_dsq_move_to_local(dsq);
	return scx_bpf_consume(dsq);
}

static __always_inline bool nl_move(struct bpf_iter_scx_dsq *it, struct task_struct *p, u64 dsq,
				    u64 flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_move))
		return scx_bpf_dsq_move(it, p, dsq, flags);
	return scx_bpf_dispatch_from_dsq(it, p, dsq, flags);
}

#endif /* NUMALAB_COMPAT_H */
