"""What every route of ``veredito serve`` stands on, below the ingest routes
(:mod:`veredito.producer.serve`) and the pages (:mod:`veredito.web`), which both import it and
which it imports neither of: the connection's defences (:mod:`~veredito.serving.guard`) and the
pool of processes for CPU-heavy work (:mod:`~veredito.serving.heavy`)."""
