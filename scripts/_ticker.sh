# Sourced by the set-up and test scripts: elapsed time while a long quiet step runs.
# ticker TAG LABEL: says the step's elapsed time until killed (run it in the background): on a
# terminal a counter updated in place, otherwise a line every 15 s. It also ends when the
# sourcing shell is gone (e.g. after Ctrl-C, which background jobs ignore).
ticker() {
  local tag=$1 label=$2 t0=$SECONDS n=0 next=15
  while kill -0 "$$" 2>/dev/null; do
    sleep 1 </dev/null >/dev/null 2>&1  # no pipe held open if it outlives a kill
    n=$((SECONDS - t0))
    if [ -t 2 ]; then
      printf '\r[%s] %d s: %s\033[K' "$tag" "$n" "${label:0:60}" >&2
    elif [ "$n" -ge "$next" ]; then
      printf '[%s] ... still %s, %d s\n' "$tag" "$label" "$n" >&2
      next=$((next + 15))
    fi
  done
}

# ticking TAG LABEL CMD...: runs CMD with a ticker beside it; CMD's exit code is returned
ticking() {
  local tag=$1 label=$2 pid rc=0
  shift 2
  ticker "$tag" "$label" &
  pid=$!
  "$@" || rc=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -t 2 ]; then printf '\r\033[K' >&2; fi
  return "$rc"
}
