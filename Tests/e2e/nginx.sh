# Sourced by the test scripts: a private nginx on 127.0.0.1, started and stopped by pid.
#   nginx_start ROOT_DIR WORK_DIR   -> sets NGINX_PORT and NGINX_PID
#   nginx_stop

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

nginx_start() {
  local root=$1 dir=$2
  mkdir -p "$dir"
  NGINX_PORT=$(free_port)
  local user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  cat >"$dir/nginx.conf" <<CONF
$user_line
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $root;
    location /error500/ { return 500; }
  }
}
CONF
  mkdir -p "$dir/tmp"
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
