# Helpers shared by the benchmark scripts (sourced, not run).

# median FILES-GLOB JQ-EXPR: the median of EXPR over the JSON files that exist, or "–".
median_of() {
    local glob=$1 expr=$2 values n
    # shellcheck disable=SC2086 # the glob is meant to expand
    values=$(for f in $glob; do
        [ -e "$f" ] && jq -r "$expr" "$f"
    done | grep -v '^null$' | sort -g || true)
    n=$(printf '%s\n' "$values" | grep -c . || true)
    if [ "$n" -eq 0 ]; then
        echo "–"
        return
    fi
    if [ $((n % 2)) -eq 1 ]; then
        printf '%s\n' "$values" | sed -n "$(((n + 1) / 2))p"
    else
        printf '%s\n' "$values" | sed -n "$((n / 2))p;$((n / 2 + 1))p" |
            awk '{s += $1} END {printf "%.6g\n", s / 2}'
    fi
}

# fmt VALUE DECIMALS
fmt() {
    [ "$1" = "–" ] && { echo "–"; return; }
    printf "%.${2}f" "$1"
}

# ratio A B: A/B in percent
ratio() {
    if [ "$1" = "–" ] || [ "$2" = "–" ]; then echo "–"; return; fi
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (b == 0) print "–"; else if (100 * a / b < 10) printf "%.1f %%\n", 100 * a / b;
        else printf "%.0f %%\n", 100 * a / b }'
}

# machine_line: one line naming the kernel, CPUs and memory
machine_line() {
    local cpu mem
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
    mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
    echo "Linux $(uname -r), $(nproc) CPUs ($cpu), $mem"
}

# bench_start NAME PREFIX TOOL...: checks we are root and have every TOOL, builds lagd and
# lagctl (release) and copies them into a fresh $work ($LAGD, $LAGCTL); on exit, every network
# namespace whose name starts with PREFIX goes (its processes first), and $work with them.
bench_start() {
    local name=$1 tool
    BENCH_PREFIX=$2
    shift 2
    [ "$(id -u)" = 0 ] || { echo "$name: run as root (network namespaces)" >&2; exit 1; }
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$name: $tool is missing" >&2; exit 1; }
    done
    cargo build --release -q -p lagd --bin lagd --bin lagctl
    work=$(mktemp -d "/tmp/lagd-${name%.sh}.XXXXXX")
    trap bench_cleanup EXIT
    cp target/release/lagd target/release/lagctl "$work/"
    LAGD="$work/lagd"
    LAGCTL="$work/lagctl"
}

bench_cleanup() {
    local ns
    for ns in $(ip netns list | awk '{print $1}' | grep "^$BENCH_PREFIX" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$work"
}

# bench_topology A B LINKS RATE: namespaces A and B joined by LINKS veth links m0.. (the same
# name at both ends), each end shaped with tc tbf to RATE (0: unshaped), loopback up.
bench_topology() {
    local a=$1 b=$2 links=$3 rate=$4 i ns burst=256kb
    ip netns add "$a"
    ip netns add "$b"
    case $rate in 0 | 1gbit | *mbit) ;; *) burst=1mb ;; esac
    for i in $(seq 0 $((links - 1))); do
        ip -n "$a" link add "m$i" type veth peer name "m$i" netns "$b"
        for ns in "$a" "$b"; do
            ip -n "$ns" link set "m$i" up
            if [ "$rate" != 0 ]; then
                tc -n "$ns" qdisc replace dev "m$i" root tbf rate "$rate" burst "$burst" latency 10ms
            fi
        done
    done
    ip -n "$a" link set lo up
    ip -n "$b" link set lo up
}

# bench_untopology NS...: ends what runs in the benchmark's own namespaces NS and deletes them.
bench_untopology() {
    local ns
    for ns in "$@"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}

# lab_setup_args SETUP: `lagctl lab` options for one of the dataplane setups (direct, kernel,
# lagd, ovs, relay); kernel and lagd run $LAGD, relay $work/bare_relay.
lab_setup_args() {
    case "$1" in
        direct) echo "--baseline direct" ;;
        kernel) echo "--lagd $LAGD --bond-opts fastpath=on" ;;
        lagd) echo "--lagd $LAGD --bond-opts fastpath=off" ;;
        ovs) echo "--baseline ovs" ;;
        relay) echo "--relay $work/bare_relay" ;;
    esac
}

# lab_test_args TEST: `lagctl lab` options for one of the dataplane tests (tcp1, tcp8, tcp8e,
# udp64, failover: a member down FAIL_AT seconds in), the duration aside.
lab_test_args() {
    case "$1" in
        tcp1) echo "--streams 1" ;;
        tcp8) echo "--streams 8" ;;
        tcp8e) echo "--streams 8 --generator iperf3-each" ;;
        udp64) echo "--udp --udp-length 64 --streams 1" ;;
        failover) echo "--streams 8 --fail-after ${FAIL_AT:-3} --generator builtin" ;;
    esac
}
