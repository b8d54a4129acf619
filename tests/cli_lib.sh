# cli_lib.sh: the prologue the CLI tests share (sourced, not run): the binary and the source tree
# from ctest's environment, M the embedded model, T a scratch directory removed on exit, and the
# failure bookkeeping (fail, bad MESSAGE) whose result the test returns as its exit status.
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
M=$SRC/models/qwen3-kernel
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
