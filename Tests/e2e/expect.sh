# Shell assertions for the CLI scripts (sourced). Needs $work; counts into $passed and $failed.
passed=0; failed=0

expect() {  # expect NAME WANTED_EXIT COMMAND...: the command's exit status
  local name=$1 want=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [[ $got -eq $want ]]; then passed=$((passed + 1)); echo "ok - $name"
  else failed=$((failed + 1)); echo "not ok - $name: exit $got, want $want"; sed 's/^/    /' "$work/err" "$work/out" | tail -8; fi
}

assert() {  # assert NAME CONDITION...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok - $name"; else failed=$((failed + 1)); echo "not ok - $name"; fi
}
