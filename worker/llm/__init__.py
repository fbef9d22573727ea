"""The side of the worker that calls the model: the OpenAI-compatible client
(:mod:`~veredito.worker.llm.client`), its rate limits (:mod:`~veredito.worker.llm.ratelimit`),
circuit breaker (:mod:`~veredito.worker.llm.breaker`), spend cap
(:mod:`~veredito.worker.llm.spend`), what leaves for the provider
(:mod:`~veredito.worker.llm.privacy`) and what its replies are taken to say
(:mod:`~veredito.worker.llm.parsing`). Nothing here imports Celery's side of the worker or the
judges (``tests/test_layout.py``)."""
