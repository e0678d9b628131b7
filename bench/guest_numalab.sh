# Sourced by the lab benches (bench/many_nodes.sh, bench/lab_emulator.sh,
# bench/lab_newidle_cost.sh) from the repository's root. First refuses
# (exit 2, before any work) a name in the bench's `topos` array, if it has
# one, that is not a lab topology; then installs what is missing
# (scripts/deps.sh), builds numalab as the lab guests take it (crt-static,
# the host triple named, as scripts/test.sh builds its tests, so a test
# run's build serves here too), sets `bin` to it, and `tmp` to a scratch
# directory removed when the bench exits.
for t in ${topos[@]+"${topos[@]}"}; do
    [[ -f lab/topologies/$t.sh ]] || {
        echo "bench/$(basename "$0"): no lab topology '$t' (lab/topologies/)" >&2
        exit 2
    }
done
bash scripts/deps.sh
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
triple=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release -q --target "$triple"
bin=target/$triple/release/numalab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
