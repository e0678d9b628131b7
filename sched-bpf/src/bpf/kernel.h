/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The kernel types and kfuncs numalab's scheduler uses, written by hand.
 *
 * Why not a bpftool-generated vmlinux.h: it is a 2-4 MB dump of one kernel
 * build, and numalab must build where no sched_ext kernel exists (this
 * project's own CI host has none). Every struct below carries
 * preserve_access_index, so libbpf relocates each field access (CO-RE)
 * against the BTF of the kernel the scheduler is loaded into: only the
 * field names must match, not the layout. struct sched_ext_ops is matched
 * by member name too (libbpf fills the kernel's struct from ours), so it
 * lists only the callbacks we implement.
 *
 * The constants are sched_ext's ABI (include/linux/sched/ext.h and
 * kernel/sched/ext.c of 6.12); they have not changed since.
 */
#ifndef NUMALAB_KERNEL_H
#define NUMALAB_KERNEL_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0
typedef int pid_t;

#define PF_KTHREAD 0x00200000

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct cpumask {
	unsigned long bits[1];
};

struct mm_struct {
	unsigned long flags;
};

struct sched_ext_entity {
	u32 flags;
	u32 weight;
	u64 slice;
	u64 dsq_vtime;
};

struct task_struct {
	unsigned int flags;
	int nr_cpus_allowed;
	const struct cpumask *cpus_ptr;
	struct mm_struct *mm;
	pid_t pid;
	pid_t tgid;
	char comm[16];
	struct sched_ext_entity scx;
};

struct linux_binprm {
	struct mm_struct *mm;
};

struct scx_init_task_args {
	bool fork;
};

struct scx_exit_task_args {
	bool cancelled;
};

/* CO-RE matches a field's kind too: an enum where the kernel has one. */
enum scx_exit_kind {
	SCX_EXIT_NONE,
};

struct scx_exit_info {
	enum scx_exit_kind kind;
	s64 exit_code;
	const char *reason;
	char *msg;
};

struct sched_ext_ops {
	s32 (*select_cpu)(struct task_struct *p, s32 prev_cpu, u64 wake_flags);
	void (*enqueue)(struct task_struct *p, u64 enq_flags);
	void (*dispatch)(s32 cpu, struct task_struct *prev);
	void (*tick)(struct task_struct *p);
	void (*runnable)(struct task_struct *p, u64 enq_flags);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	void (*quiescent)(struct task_struct *p, u64 deq_flags);
	s32 (*init_task)(struct task_struct *p, struct scx_init_task_args *args);
	void (*exit_task)(struct task_struct *p, struct scx_exit_task_args *args);
	void (*enable)(struct task_struct *p);
	s32 (*init)(void);
	void (*exit)(struct scx_exit_info *info);
	u64 flags;
	u32 timeout_ms;
	char name[128];
};

#pragma clang attribute pop

/* The open-coded number iterator (bpf_for): uapi since 6.4, newer than Debian 12's headers. */
struct bpf_iter_num {
	u64 __opaque[1];
} __attribute__((aligned(8)));

/* The DSQ iterator's state: opaque, its size is the ABI. */
struct bpf_iter_scx_dsq {
	u64 __opaque[6];
} __attribute__((aligned(8)));

/* enum scx_public_consts, scx_dsq_id_flags, scx_enq_flags, scx_kick_flags */
#define SCX_SLICE_DFL (20ULL * 1000 * 1000)
#define SCX_DSQ_FLAG_BUILTIN (1ULL << 63)
#define SCX_DSQ_FLAG_LOCAL_ON (1ULL << 62)
#define SCX_DSQ_LOCAL (SCX_DSQ_FLAG_BUILTIN | 2)
#define SCX_DSQ_LOCAL_ON (SCX_DSQ_FLAG_BUILTIN | SCX_DSQ_FLAG_LOCAL_ON)
#define SCX_ENQ_WAKEUP (1ULL << 0)
#define SCX_KICK_IDLE (1ULL << 0)
#define SCX_KICK_PREEMPT (1ULL << 1)
#define SCX_OPS_ENQ_LAST (1ULL << 1)
#define SCX_OPS_ENQ_EXITING (1ULL << 2)
#define SCX_ENQ_LAST (1ULL << 41)
#define SCX_TASK_QUEUED (1U << 0)

/*
 * kfuncs. 6.12 names the insert/move calls scx_bpf_dispatch*() and
 * scx_bpf_consume(); 6.13 renamed them scx_bpf_dsq_insert*(),
 * scx_bpf_dsq_move_to_local() and scx_bpf_dsq_move(), and later kernels drop
 * the old names. Both are declared weak and compat.h picks the one the
 * running kernel has (libbpf resolves a missing weak kfunc to 0 and the
 * verifier removes the dead branch).
 */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
			   bool *is_idle) __ksym;
void scx_bpf_dispatch(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dispatch_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			    u64 enq_flags) __ksym __weak;
bool scx_bpf_consume(u64 dsq_id) __ksym __weak;
bool scx_bpf_dispatch_from_dsq(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p,
			       u64 dsq_id, u64 enq_flags) __ksym __weak;
void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			      u64 enq_flags) __ksym __weak;
bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym __weak;
bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id,
		      u64 enq_flags) __ksym __weak;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, u64 flags) __ksym;
const struct cpumask *scx_bpf_get_idle_cpumask(void) __ksym;
void scx_bpf_put_idle_cpumask(const struct cpumask *cpumask) __ksym;
int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __ksym __weak;
struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym __weak;
void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym __weak;
bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
void bpf_rcu_read_lock(void) __ksym;
void bpf_rcu_read_unlock(void) __ksym;

#endif /* NUMALAB_KERNEL_H */
