#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test,
# unit tests and the QEMU lab tests on multi-node guests. Set
# NUMALAB_REQUIRE_TOOLS=1 (CI does) to make a missing tool fail instead of
# skipping the tests that need it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
exec cargo test --release "$@"
