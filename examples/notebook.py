# %% [markdown]
# # Comparing two retrievers with veredito
#
# A data scientist's notebook, as a script (each `# %%` is a cell; VS Code and Jupytext open it
# as a notebook). It runs offline with the rules judge: set VEREDITO_LLM_BASE_URL and
# VEREDITO_LLM_API_KEY and pass judge="llm" to use a model instead.

# %%
import json
from pathlib import Path

import veredito

HERE = Path(__file__).resolve().parent
examples = [json.loads(line) for line in (HERE / "triples.jsonl").open(encoding="utf-8")]

# %% [markdown]
# Two "retrievers": A gives each answer its own context; B gives the context of the previous
# question (a retriever that fetched the wrong chunk). Same answers, different contexts.

# %%
retriever_a = [{**t, "id": f"a-{t['id']}"} for t in examples]
retriever_b = [
    {**t, "id": f"b-{t['id']}", "context": examples[i - 1]["context"]}
    for i, t in enumerate(examples)
]

# %%
with veredito.Judge("rules") as judge:  # one judge, reused for both runs
    report_a = judge.evaluate(retriever_a)
    report_b = judge.evaluate(retriever_b)

print(f"retriever A: {report_a.hallucination_rate:.0%} of answers with a hallucination")
print(f"retriever B: {report_b.hallucination_rate:.0%} of answers with a hallucination")

# %% [markdown]
# What did B's answers invent? The categories say which kind of fact went wrong.

# %%
from collections import Counter  # noqa: E402

by_category = Counter(c for v in report_b for c in v.categories)
for category, count in by_category.most_common():
    print(f"{category:<14} {count}")

# %%
worst = min(report_b, key=lambda v: v.score if v.score is not None else 1.0)
print(worst.input.query if worst.input else worst.id)
for claim in worst.claims:
    print(f"  [{claim.verdict}, {claim.category or '-'}] {claim.text}")

# %% [markdown]
# In Jupyter, `report_b` alone shows a table; `report_b.to_pandas()` gives a DataFrame (with
# pandas installed), and `report_b.to_jsonl("b.jsonl")` keeps the verdicts.

# %%
out = report_b.to_jsonl(HERE.parent / "out" / "retriever-b.jsonl")
print(f"verdicts in {out}")
assert report_b.hallucination_rate > report_a.hallucination_rate, "B should do worse"
