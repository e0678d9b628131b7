#!/usr/bin/env bash
# Installs what numalab's tests and lab need, when missing: QEMU, Debian's
# kernel, busybox-static, numactl (reference output), cpio, gcc (reference
# probe), and the rustfmt/clippy components. Idempotent; quiet when all is there.
set -euo pipefail

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
compgen -G '/boot/vmlinuz-*' >/dev/null || need+=(linux-image-amd64)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || need+=(busybox-static)
command -v numactl >/dev/null || need+=(numactl)
command -v cpio >/dev/null || need+=(cpio)
command -v gcc >/dev/null || need+=(gcc)

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
