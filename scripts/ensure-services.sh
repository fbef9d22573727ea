#!/usr/bin/env bash
# Make sure the services the tests need answer: RabbitMQ (5672) and Redis (6379).
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
status=0
wait_for 6379 Redis 30 || status=1
wait_for 5672 RabbitMQ 120 || status=1
exit $status
