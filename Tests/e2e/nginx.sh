# Sourced by the test scripts: a private nginx on 127.0.0.1, started and stopped by pid.
#   nginx_start ROOT_DIR WORK_DIR   -> sets NGINX_PORT and NGINX_PID
#   nginx_stop

_nginxctl="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nginxctl.py"

nginx_start() {
  local root=$1 dir=$2
  mkdir -p "$dir"
  NGINX_PORT=$(python3 "$_nginxctl" conf "$root" "$dir" 'location /error500/ {{ return 500; }}') || return 1
  /usr/sbin/nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" &
  NGINX_PID=$!
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/"; then return 0; fi
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$dir/error.log" >&2; return 1; }
    sleep 0.05
  done
  echo "nginx did not come up on port $NGINX_PORT" >&2
  return 1
}

nginx_stop() {
  if [[ -n ${NGINX_PID:-} ]]; then
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=
  fi
}
