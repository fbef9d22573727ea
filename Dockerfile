# veredito: one image for the worker, the results sink, serve (ingest, review page), the producer
# and `veredito run`.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY producer ./producer
COPY worker ./worker
COPY prompts ./prompts
COPY veredito ./veredito
RUN pip install '.[redis,postgres,serve,otel]' && useradd --create-home --uid 10001 veredito
USER veredito
EXPOSE 9808 8080
ENTRYPOINT ["veredito"]
CMD ["worker"]
