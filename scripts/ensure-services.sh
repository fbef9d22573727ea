#!/usr/bin/env bash
# Make sure the services the tests need answer: RabbitMQ (5672), Redis (6379), PostgreSQL (5432).
# Starts the machine's own Debian services when they do not; waits for them with a deadline.
set -u

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {  # port name seconds
  local deadline=$((SECONDS + $3))
  until answers "$1"; do
    if ((SECONDS >= deadline)); then echo "ensure-services: $2 does not answer on :$1" >&2; return 1; fi
    sleep 1
  done
  echo "ensure-services: $2 answers on :$1"
}

if ! answers 6379; then
  echo "ensure-services: starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
if ! answers 5672; then
  echo "ensure-services: starting RabbitMQ"
  rabbitmq-server -detached || true
fi
if ! answers 5432; then
  echo "ensure-services: starting PostgreSQL"
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
fi
status=0
wait_for 6379 Redis 30 || status=1
wait_for 5432 PostgreSQL 60 || status=1
wait_for 5672 RabbitMQ 120 || status=1

# RabbitMQ's own Prometheus plugin (queue depth for the monitoring tests and the dashboard)
if ! answers 15692; then
  echo "ensure-services: enabling rabbitmq_prometheus"
  timeout 120 rabbitmq-plugins enable rabbitmq_prometheus >/dev/null || true
  wait_for 15692 "RabbitMQ Prometheus plugin" 60 || status=1
fi

# Prometheus and promtool, from Debian's prometheus package
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "ensure-services: installing Debian's prometheus package"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends prometheus >/dev/null || status=1
  else
    echo "ensure-services: not root; install the prometheus package yourself" >&2
    status=1
  fi
fi
# Debian's chromium and chromium-driver, for the review page's browser tests
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "ensure-services: installing Debian's chromium and chromium-driver"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends chromium chromium-driver >/dev/null || status=1
  else
    echo "ensure-services: not root; install chromium and chromium-driver yourself" >&2
    status=1
  fi
fi
# kubectl (with kustomize built in) renders deploy/kubernetes for tests/test_kubernetes.py. The
# machine image brings it as the `kubectl` package of Google's Cloud SDK apt repository; install
# it the same way where that repository is configured. Debian's own kubernetes-client (1.20) is
# too old for kustomize components, so there is no fallback: the test says what is missing.
if ! command -v kubectl >/dev/null; then
  echo "ensure-services: installing kubectl"
  if [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null \
     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubectl \
        >/dev/null; then
    echo "ensure-services: $(kubectl version --client 2>/dev/null | head -1)"
  else
    echo "ensure-services: no kubectl package here (the Cloud SDK apt source); tests/test_kubernetes.py will say so" >&2
  fi
fi
exit $status
