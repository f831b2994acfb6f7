# Sourced by the shell tests (test/tools/test_ferryrun.sh, test/cluster/test_cluster.sh): a
# temporary folder $TMP removed at exit, and fail(), which reports a failed check and counts it in
# $failures for the script's exit status.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
