"""POLITICA: public programmes and benefits (``Bolsa Família``, ``BPC``, ``FGTS``, ``Pix``,
``Minha Casa, Minha Vida``, ``Pé-de-Meia`` ...).

Found by acronym or name with the gazetteer's other names (``names``, from
:data:`gazetteer.PROGRAMMES <veredito.worker.rules.gazetteer.PROGRAMMES>`); key
``programme|<id>``, with a state after the name as for bodies (``bodies.state_suffix``).

Like bodies, a programme is never "another value" of another one: a programme the context does
not name is invented (``contradictable=False``); asking about one in the query does not ground
the answer's facts about it (``engine``: the query grounds figures, dates, IDs and places only).
"""

from __future__ import annotations

from veredito.worker.rules.bodies import state_suffix
from veredito.worker.rules.mention import Mention

__all__ = ["programme_mention"]


def programme_mention(text: str, start: int, end: int, ident: str) -> Mention:
    """A programme the gazetteer knows, found at ``text[start:end]``."""
    end, extra = state_suffix(text, end, ident)
    key = frozenset({f"programme|{ident}"})
    return Mention("POLITICA", text[start:end], key, start, end, contradictable=False, extra=extra)
