# Sourced by the test scripts (fuzz.sh, test_asan.sh, test_arm64.sh): runs independent jobs a few at
# a time, so a 2-core CI machine keeps both cores busy with single-threaded runs.
# pool_run <slots> <function> <item>...: runs "<function> <item>" in the background for each item, in
# the order given (give the longest first: the last to start should be short), at most <slots> at
# once; returns 1 if any of them failed, after all have ended. Parallel jobs' lines interleave: each
# job should write its output to its own log and print a line or two when it ends.
pool_run() {
    local slots=$1 fn=$2 pids=() status=0 item pid
    shift 2
    for item in "$@"; do
        while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do wait -n || true; done
        "$fn" "$item" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done  # each job's status, even if wait -n took it
    return $status
}

# run_gtest_logged <label> <log> <command>...: runs a gtest binary (or shard) with its output in <log>;
# prints "<label>: [  PASSED  ] N tests. (S s)", or on failure "<label> FAILED", the log's path and its
# last 60 lines (to stderr), and returns 1.
run_gtest_logged() {
    local label=$1 log=$2 start=$SECONDS
    shift 2
    if ! "$@" > "$log" 2>&1; then
        echo "$label FAILED; its log is $log:" >&2
        tail -n 60 "$log" >&2
        return 1
    fi
    echo "$label: $(grep -E '^\[  PASSED  \]' "$log") ($((SECONDS - start)) s)"
}
