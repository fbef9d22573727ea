"""Answers as chatbots write them: markdown and citation debris turned into plain sentences.

Real LLM answers come with headings, bullets, numbered lists, tables, bold and italic, block
quotes, links, and the debris of search-augmented chatbots: ``[1][4]`` markers, ChatGPT's
``citeturn0search2`` (between private-use characters, or bare when those were lost), a trailing
``Citations: [1] https://…`` or ``Fontes:`` list, Perplexity's ``Resposta do Perplexity:
pplx.ai/share`` footer. :func:`claims_of` gives the sentences to judge and how many pieces were
dropped as non-claims (headings, source lists, footers, table rules): counted, never judged.
:func:`clean` strips the inline debris from one claim (the cross-check reads the LLM's claims).
:func:`is_advice` tells a claim of fact from advice: a recommendation, a generic evaluation,
courtesy or talk about the answer itself (``kind: "advice"`` in the verdict, spec §17).

Where the line breaks survive, a heading is its line. Some exports flatten the whole answer to
one line (``# Critérios para Apresentar a DIRPF 2024 No Brasil, **estão…``); there the heading
ends before the first capitalised article or preposition that opens the body (``A``, ``No``,
``Para``…), within 20 words, or at its first colon.
"""

from __future__ import annotations

import re

from veredito.worker.rules.text import fold, split_sentences

__all__ = ["ADVICE", "META", "claims_of", "clean", "is_advice"]

# talk about the answer or the context itself ("O contexto não informa o prazo."), matched on the
# claim as written
META = re.compile(
    r"\b(?:n[aã]o\s+(?:[eé]\s+)?(?:informa|menciona|mencionad|diz|especifica|traz|cont[eé]m|"
    r"apresenta|fala|consta|detalha|cita|esclarece|aborda|indica|encontrei|localizei|h[aá]\s+"
    r"(?:informa|men[cç]|dados|detalhes|registro)|tenho\s+(?:essa|esta|a)?\s*informa|sei\b|"
    r"est[aá]\s+(?:no|nos|na|nas|claro)|aparece|possuo|disp[oõ]e|encontra-se)|"
    r"sem\s+informa[cç]|n[aã]o\s+foi\s+(?:poss[ií]vel|informad|mencionad|especificad))",
    re.IGNORECASE,
)
# a statement about what to do, not what is: a fact introduced by "é importante lembrar que…"
# stays a fact
_FACT_INTRO = (
    r"(?!\s+(?:destacar|lembrar|ressaltar|notar|observar|salientar|frisar|mencionar|informar|"
    r"saber|dizer|esclarecer|registrar)\b)"
)
_IMPERATIVE = (
    r"verifique|verificar|consulte|consultar|calcule|calcular|garanta|garantir|evite|evitar|"
    r"audite|auditar|simule|simular|monitore|monitorar|documente|documentar|mantenha|manter|"
    r"guarde|guardar|revise|revisar|acompanhe|acompanhar|planeje|planejar|busque|buscar|procure|"
    r"procurar|avalie|avaliar|organize|organizar|confira|conferir|utilize|considere|considerar|"
    r"fique|atualize|priorize|priorizar"
)
# recommendations, advice, generic evaluations, courtesy (matched on the folded claim)
ADVICE = re.compile(
    r"(?:^|\b)(?:"
    r"sugiro|sugerimos|sugere-se|recomendo|recomendamos|recomenda-se|recomendado|aconselho|"
    r"aconselhamos|aconselha-se|o\s+ideal\s+e|o\s+melhor\s+(?:caminho|a\s+fazer)|"
    r"(?:e|seria|sera|fica|torna-se)\s+(?:sempre\s+|muito\s+|bastante\s+)?(?:recomendavel|"
    r"aconselhavel|prudente|importante|fundamental|essencial|crucial|indispensavel|interessante|"
    r"util|bom|ideal|conveniente|imprescindivel|vital|valido|oportuno)" + _FACT_INTRO + r"|"
    r"vale\s+a\s+pena|convem|nao\s+deixe\s+de|fique\s+atent|tenha\s+em\s+mente|"
    r"lembre-se(?!\s+de\s+que)|"
    r"(?:devem|deve|precisam|precisa)\s+(?:sempre\s+)?(?:priorizar|buscar\s+orienta|considerar|"
    r"avaliar|ficar\s+atent|estar\s+atent|se\s+atentar|manter-se|se\s+informar|se\s+planejar|"
    r"planejar)|"
    r"(?:e|sao|se\s+mostra)\s+(?:crucial|cruciais|essencial|essenciais|fundamental|fundamentais|"
    r"indispensavel|indispensaveis|vital|vitais)\s+para|desempenham?\s+(?:um\s+)?papel|"
    r"(?:evita|evitar|evitando|ajuda\s+a\s+evitar|previne)\s+(?:problemas|transtornos|surpresas|"
    r"dores\s+de\s+cabeca|complica)|"
    r"espero\s+(?:ter\s+)?(?:ajudado|que\s+(?:isso|essas|estas|a\s+resposta|as\s+informa))|"
    r"(?:fico|estou|estamos|ficamos)\s+a\s+disposicao|qualquer\s+(?:outra\s+)?duvida|"
    r"em\s+caso\s+de\s+duvidas?|se\s+(?:tiver|precisar|houver|restar|surgir|ainda\s+tiver)\s+"
    r"(?:de\s+)?(?:mais|outras?|alguma|qualquer|ajuda|duvidas?)|"
    r"posso\s+(?:ajudar|te\s+ajudar|esclarecer)|boa\s+sorte|bons\s+estudos|boa\s+viagem|"
    # the answer speaking of itself ("Este relatório examina as opções…")
    r"^\W*(?:este|esta|o\s+presente|a\s+presente)\s+(?:relatorio|analise|artigo|guia|texto|"
    r"resposta|estudo|secao|material)\s+(?:detalha|examina|explora|analisa|apresenta|aborda|"
    r"discute|descreve|resume|traz|oferece|busca|pretende)|"
    # an instruction opening the claim, or a list item's "Label:" ("Monitorar prazos: …")
    r"^\W*(?:[\w-]+\s+){0,5}?(?:[\w-]+:\s+)?(?:" + _IMPERATIVE + r")\b|"
    # generic evaluations ("… exige atenção aos prazos", "… reduz riscos de autuação")
    r"\b(?:exige|exigem|demanda|demandam|requer|requerem)\s+(?:\w+\s+)?(?:atencao|analise|cuidado|"
    r"precisao|diagnostico|planejamento|avaliacao|acompanhamento|conhecimento)|"
    r"\b(?:e|constitui|representa|configura|torna-se)\s+(?:um|uma)\s+(?:\w+\s+)?(?:tema|"
    r"mecanismo|ferramenta|instrumento|estrategia|avanco|aspecto|passo|desafio)\s+"
    r"(?:critic|essencia|fundamenta|importante|valios|relevante|crucia|estrategic|util|decisiv)|"
    r"\b(?:e|sao)\s+(?:critic[ao]s?|decisiv[ao]s?)\s+para|"
    r"\breduz(?:indo|em|ir)?\s+(?:os\s+|o\s+)?riscos?|\b(?:maximiza|otimiza)|"
    r"\b(?:pode|podem)\s+ser\s+(?:mais\s+)?(?:vantajos|interessante|util|benefic)"
    r")"
)
_CONDITIONAL = re.compile(r"^\W*se\b", re.IGNORECASE)
# a body named by a word the detectors may not know ("a Delegacia de Crimes Cibernéticos"): a
# referral to a body is a claim (rule 3 of the user's prompt), never advice
_BODY_WORD = re.compile(
    r"\b(?:Delegacia|Procon|PROCON|Receita|Minist[eé]rio|Secretaria|Tribunal|Juizado|Defensoria|"
    r"Ouvidoria|Ag[eê]ncia|Banco\s+Central|Instituto|Conselho|Pol[ií]cia|Prefeitura|Cart[oó]rio|"
    r"Justi[cç]a|Senacon|INSS|SUSEP|Susep|ANS|Anatel|ANATEL|Aneel|ANEEL|Anvisa|ANVISA|Detran|DETRAN|"
    r"Serasa|SPC|consumidor\.gov)"
)

# what a rule says ("é recomendável, mas opcional, manter um seguro" where the contract makes it
# obligatory): a statement of what is required, allowed or free is a claim of policy
_RULE_WORD = re.compile(
    r"\b(?:opciona[li]s?|obrigat[oó]ri|facultativ|gratuit|sem\s+custo|isent|proibid|permitid|vedad|"
    r"dispensad|exigid|garantid|direito|reembols|multa|taxa|cobra)"
)


def is_advice(claim: str, mentions: int) -> bool:
    """Is ``claim`` advice rather than a claim of fact (spec §17, ``kind: "advice"``)? A
    recommendation ("É recomendável retificar a declaração."), a generic evaluation ("A
    assessoria contábil é crucial para…"), courtesy ("Espero ter ajudado!") or talk about the
    answer itself ("Não encontrei essa informação nos documentos."), holding nothing the judge
    can check: a claim with a ``mentions`` (a value, law, ID, body, place…) is a claim of fact,
    so "Procure o Procon." where the context never names the Procon stays a flag (rule 3 of
    the user's prompt), and so does a claim naming a body by a word the detectors may not know
    ("registre um boletim na Delegacia de Crimes Cibernéticos"). A conditional ("Se a mala não
    aparecer…") is not talk about the answer, and a claim saying what is required, allowed,
    free or charged is a claim of policy, not advice."""
    if mentions or _BODY_WORD.search(claim) is not None:
        return False
    folded = fold(claim)
    if _RULE_WORD.search(folded) is not None:
        return False
    if ADVICE.search(folded) is not None:
        return True
    return _CONDITIONAL.match(claim) is None and META.search(claim) is not None


# ChatGPT search citations: "\ue200cite\ue202turn0search6\ue201", or "citeturn0search6" bare
_CITE_PRIVATE = re.compile(r"\ue200[^\ue201]*\ue201|[\ue200-\ue2ff]")
_CITE_BARE = re.compile(r"\s*\bcite(?:turn\d+(?:search|news|view|file|image)\d+)+")
# "[1]", "[1][4]", "[2, 3]", "[1-3]": markers, not text
_CITE_BRACKETS = re.compile(r"(?:\s*\[\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\])+")
# a link whose parenthesis holds nothing else: "([Agência Gov](https://…))" is a citation
_LINK_CITATION = re.compile(r"\s*\(\s*\[[^\]]*\]\(\s*https?://[^)\s]*\s*\)\s*\)")
_LINK = re.compile(r"!?\[([^\]]*)\]\(\s*(?:https?://|www\.)[^)\s]*\s*\)")
_URL = re.compile(r"\s*\(?\b(?:https?://|www\.)\S+")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=\S)\1")
_CODE = re.compile(r"`([^`]*)`")
# a trailing list of sources: "Citations: [1] https://…", "Fontes: …", "Referências:"
_SOURCES = re.compile(
    r"(?:^|\s)(?:#{1,6}\s*)?(?:\*\*)?(?:citations|cita[cç][oõ]es|fontes|refer[eê]ncias|references|"
    r"sources)(?:\*\*)?\s*:?\s*(?:\*\*)?\s*(?:\n|\[\d+\]|\d+\.\s|-\s|https?://).*$",
    re.IGNORECASE | re.DOTALL,
)
_FOOTER = re.compile(
    r"(?:-{3,}\s*)?(?:resposta\s+do\s+perplexity|perplexity\s*:|pplx\.ai/share).*$",
    re.IGNORECASE | re.DOTALL,
)
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,}|\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?)\s*$")
_HEADING_LINE = re.compile(r"^\s*#{1,6}\s+\S")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+")
_QUOTE = re.compile(r"^\s*>+\s?")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# flattened: " # Heading", " - item", " 1. item", " | a | b |" inside one line
_FLAT_HEADING = re.compile(r"(?:^|\s)#{1,6}\s+")
_FLAT_BREAK = re.compile(r"\s+(?=(?:[-•]|\d{1,2}\.)\s+(?:\*\*)?[A-ZÁÉÍÓÚÂÊÔÃÕÇ0-9])")
_BODY_START = frozenset(
    "A O As Os Em No Na Nos Nas Para Por Pela Pelo Com Se Segundo Conforme De Do Da Desde Sim "
    "Não Este Esta Essa Esse Isso Todo Toda Cada Hoje Atualmente Caso Quando Como Ao Aos Um Uma "
    "É Há Você Quem Sua Seu".split()
)
_HEADING_WORDS = 20
# anything markdown or a chatbot's citations could be made of; without it an answer is prose
_MARKUP = re.compile(
    r"[#*|\[\]`>_\ue200-\ue2ff\n]|cite|https?:|www\.|---|fontes|refer[eê]ncias|citations|"
    r"sources|perplexity",
    re.IGNORECASE,
)


def clean(text: str) -> str:
    """One claim without citation markers, links, emphasis, code marks and URLs."""
    text = _CITE_PRIVATE.sub("", text)
    text = _CITE_BARE.sub("", text)
    text = _LINK_CITATION.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _CITE_BRACKETS.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _EMPHASIS.sub(r"\2", text)  # "***x***" and nested bold in italic
    text = _CODE.sub(r"\1", text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def _flat_heading(line: str) -> tuple[str | None, str]:
    """A heading flattened into its body: (heading, body), or (None, line) when none is found."""
    words = line.split(" ")
    for i, word in enumerate(words[1 : _HEADING_WORDS + 1], start=1):
        previous = words[i - 1]
        if i > 1 and word.lower().strip("*") == words[0].lower().strip("*"):
            return " ".join(words[:i]), " ".join(words[i:])  # "Aposentados Aposentados com…"
        if word in _BODY_START and not previous.endswith(":"):
            return " ".join(words[:i]), " ".join(words[i:])
        if previous.endswith(":") and i > 1:
            return " ".join(words[:i]), " ".join(words[i:])
    return None, line


def _table_row(line: str, header: list[str]) -> str:
    """A row as a sentence, each cell with its column's name: "Faixa 2; Renda: até R$ 4.700"."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    names = [*header, *[""] * len(cells)][: len(cells)]
    named = [f"{h} {c}" if h else c for h, c in zip(names, cells, strict=True)]
    return "; ".join(n for n, c in zip(named, cells, strict=True) if c) + "."


def claims_of(answer: str) -> tuple[list[str], int]:
    """The sentences of ``answer`` worth judging, and how many pieces were dropped as non-claims
    (headings, source lists, footers, rules of tables)."""
    if _MARKUP.search(answer) is None:  # plain prose, the common case: sentences only
        every = split_sentences(answer)
        prose = [x for x in every if not _is_title(x)]
        return prose, len(every) - len(prose)
    dropped = 0
    text = answer.replace("\r\n", "\n").strip()
    if len(text) > 1 and text[0] == text[-1] == '"':  # an export that quoted the whole answer
        text = text[1:-1]
    text = _CITE_PRIVATE.sub("", text)
    for pattern in (_FOOTER, _SOURCES):
        found = pattern.search(text)
        if found is not None and found.start() > 0:
            text = text[: found.start()]
            dropped += 1
    pieces: list[str] = []
    header: list[str] | None = None  # a table's column names, once its first row is read
    for line in text.split("\n"):
        if not line.strip():
            header = None
            continue
        if _RULE.match(line):
            dropped += 1
            continue
        if _HEADING_LINE.match(line) and len(line.split()) <= _HEADING_WORDS:
            dropped += 1  # a longer one is a flattened answer: its heading is cut off below
            continue
        if _TABLE_ROW.match(line):
            if header is None:
                header = [c.strip() for c in line.strip().strip("|").split("|")]
                dropped += 1  # the column names alone say nothing
                continue
            pieces.append(_table_row(line, header))
            continue
        line = _QUOTE.sub("", line)
        line = _BULLET.sub("", line)
        # flattened markdown: headings and list items inside one line
        parts = _FLAT_HEADING.split(line)
        for j, part in enumerate(parts):
            if not part.strip():
                continue
            if j > 0:  # after a "#": the heading, then its body
                heading, part = _flat_heading(part.strip())
                if heading is not None:
                    dropped += 1
                elif len(part.split()) <= _HEADING_WORDS:
                    dropped += 1
                    continue
            pieces.extend(p for p in _FLAT_BREAK.split(part) if p.strip())
    sentences: list[str] = []
    for piece in pieces:
        for sentence in split_sentences(_BULLET.sub("", clean(piece))):
            sentence = _TRAILING_RULE.sub("", sentence)
            if sentence.strip(" .;:-•*#|>") and not _is_title(sentence):
                sentences.append(sentence)
            else:
                dropped += 1
    return sentences, dropped


_SOURCES_LEAD = re.compile(r"(?:fontes|refer[eê]ncias|citations|sources)\s*:", re.IGNORECASE)
_TRAILING_RULE = re.compile(r"\s*(?:-{3,}|\*{3,}|_{3,})\s*$")
_SMALL_WORDS = frozenset("a o as os e de do da dos das em no na nos nas para por com ou".split())


def _is_title(sentence: str) -> bool:
    """A piece that states nothing: a list's title ("Nesses casos, o contribuinte pode:",
    "O cálculo do imposto seria:"), or a short heading whose line breaks were lost
    ("Documentação Necessária", "Via Certificado Digital")."""
    text = sentence.strip()
    if _SOURCES_LEAD.match(text):
        return True
    if text.endswith(":"):  # a list's title, unless it states something checkable ("art. 19")
        return not any(c.isdigit() for c in text)
    words = text.rstrip(".").split()
    if not words or len(words) > 6 or text[-1:] in ".!?;" or any(c.isdigit() for c in text):
        return False  # a sentence, or something checkable ("ISS: R$ 5,00")
    content = [w for w in words if w.lower() not in _SMALL_WORDS]
    return bool(content) and all(w[:1].isupper() or w[:1].isdigit() for w in content)
