"""What ``veredito serve`` shows over HTTP: :mod:`.app` composes the server (ingest routes from
:mod:`veredito.producer.serve`, the read side, health and metrics), :mod:`.review` is the verdicts
API and the review page, :mod:`.highlight` places claims in answers, :mod:`.guard` holds the
server's defences below the routes."""
