#!/usr/bin/env bash
# Installs what numalab's build, tests and lab need, when missing: clang 16
# (numalab's sched_ext scheduler is BPF C compiled at build time), make,
# pkg-config and the static libelf/zlib that libbpf is linked with
# (libelf-dev, zlib1g-dev), QEMU, Debian's kernel, busybox-static, numactl
# (reference output), cpio, gcc (reference probe), the source and tools to
# build the lab kernel (lab/kernel/build: linux-source-6.12, make, flex,
# bison, bc, libelf-dev, patch, pahole from dwarves for its BTF), and the
# rustfmt/clippy components. Idempotent; quiet when all is there.
set -euo pipefail

need=()
# The build: the BPF scheduler (sched-bpf/build.rs) and libbpf-sys.
command -v clang-16 >/dev/null || need+=(clang-16)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -e /usr/lib/x86_64-linux-gnu/libz.a ] || need+=(zlib1g-dev)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
compgen -G '/boot/vmlinuz-*' >/dev/null || need+=(linux-image-amd64)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || need+=(busybox-static)
command -v numactl >/dev/null || need+=(numactl)
command -v cpio >/dev/null || need+=(cpio)
command -v gcc >/dev/null || need+=(gcc)
# The lab kernel (tests/lab_pnid.rs builds it when the lab cache lacks it), and
# tests/pnid_patch_locality.rs (the patched fair.c function, with patch).
[ -e /usr/src/linux-source-6.12.tar.xz ] || need+=(linux-source-6.12)
command -v make >/dev/null || need+=(make)
command -v flex >/dev/null || need+=(flex)
command -v bison >/dev/null || need+=(bison)
command -v bc >/dev/null || need+=(bc)
command -v patch >/dev/null || need+=(patch)
[ -e /usr/include/libelf.h ] && [ -e /usr/lib/x86_64-linux-gnu/libelf.a ] || need+=(libelf-dev)
# The lab kernel's BTF (CONFIG_DEBUG_INFO_BTF, which sched_ext needs).
command -v pahole >/dev/null || need+=(dwarves)
# gcc -static for lab/kernel/pnidctl.c needs libc.a.
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)

if ((${#need[@]})); then
    if [ "$(id -u)" != 0 ]; then
        echo "deps: missing ${need[*]}; run as root (or install them) for the lab tests" >&2
    else
        echo "deps: installing ${need[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
fi

for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null 2>&1 || true
done
