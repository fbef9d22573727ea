# veredito: one image for the worker, the results sink, serve (ingest, review page), the producer
# and `veredito run`. Small and non-root: the package with the extras a service needs (a Redis
# broker, the PostgreSQL store, the review page, OTLP ingest, scikit-learn for serve's calibration
# refit from reviewers' labels) in a virtualenv built in a first stage; no compiler, no pip, no source tree in the image; uid 10001, whose files are read-only.
# Build, tag and pin: docs/kubernetes.md, "The image".
#   docker build -t registry.example.com/veredito:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/veredito
COPY pyproject.toml README.md LICENSE ./
COPY producer ./producer
COPY worker ./worker
COPY prompts ./prompts
COPY veredito ./veredito
RUN /opt/veredito/bin/pip install '.[redis,postgres,serve,otel,otel-grpc,fast,calibration]' \
 && /opt/veredito/bin/pip uninstall --yes pip

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/veredito/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
COPY --from=build /opt/veredito /opt/veredito
RUN groupadd --gid 10001 veredito \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin veredito
# numeric, so that Kubernetes' runAsNonRoot can tell it is not root
USER 10001:10001
EXPOSE 9808 8080
ENTRYPOINT ["veredito"]
CMD ["worker"]
