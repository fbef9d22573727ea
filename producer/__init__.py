"""veredito's producer side: the triple contract, input readers and the task publisher.

The producer never imports the worker; the worker imports this package's contract.
"""

from veredito.producer.triple import InvalidTriple, Limits, Triple, parse_triple, triple_id

__all__ = ["InvalidTriple", "Limits", "Triple", "parse_triple", "triple_id"]
