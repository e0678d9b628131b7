# Sourced by the lab benches (bench/many_nodes.sh, bench/lab_emulator.sh)
# from the repository's root: builds numalab as the lab guests take it
# (crt-static, the host triple named, as scripts/test.sh builds its tests,
# so a test run's build serves here too), sets `bin` to it, and `tmp` to a
# scratch directory removed when the bench exits.
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
triple=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release -q --target "$triple"
bin=target/$triple/release/numalab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
