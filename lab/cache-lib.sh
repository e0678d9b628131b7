# shellcheck shell=bash
# Where the lab's cache lives; sourced by lab/guest and lab/kernel/build.
# Kept out of their files so that it is in no cache key: where things are
# cached decides nothing about what is in them (lab/README.md, "Cache").

# lab_cache_dir LAB_DIR: creates the cache directory and prints its absolute
# path. NUMALAB_LAB_CACHE, when set, must be usable (an explicit choice is
# never overridden); otherwise $XDG_CACHE_HOME/numalab-lab or
# ~/.cache/numalab-lab, and LAB_DIR/.cache when there is no HOME or that
# directory cannot be created or written (a read-only or foreign HOME).
_lab_cache_usable() { mkdir -p -- "$1" 2>/dev/null && [[ -w $1 ]]; }

lab_cache_dir() {
    local lab_dir=$1 user_cache dir
    if [[ -n ${NUMALAB_LAB_CACHE:-} ]]; then
        _lab_cache_usable "$NUMALAB_LAB_CACHE" || {
            echo "NUMALAB_LAB_CACHE=$NUMALAB_LAB_CACHE: cannot create or write it" >&2
            return 1
        }
        (CDPATH= cd -- "$NUMALAB_LAB_CACHE" && pwd)
        return
    fi
    user_cache=${XDG_CACHE_HOME:-${HOME:+$HOME/.cache}}
    if [[ -n $user_cache ]]; then
        dir=$user_cache/numalab-lab
        if _lab_cache_usable "$dir"; then
            (CDPATH= cd -- "$dir" && pwd)
            return
        fi
        echo "note: cannot create or write $dir; caching in $lab_dir/.cache" >&2
    fi
    dir=$lab_dir/.cache
    _lab_cache_usable "$dir" || {
        echo "cannot create or write the cache directory $dir" >&2
        return 1
    }
    (CDPATH= cd -- "$dir" && pwd)
}
