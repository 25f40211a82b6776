"""SQL QA tasks from a seed: a small two-table database (SQL text), a question, the gold query.

Practice and held-out tasks draw from disjoint domain vocabularies (table, column and value names), and held-out
seeds derive from the held-out secret, so no held-out task equals a practice one. With the `case` pitfall the stored
category values are upper-case while the question spells them in lower case: a query written from the question alone
returns 0 on the sample database, which validation reveals.
"""

from __future__ import annotations

import random
from typing import Any

from bat.staged.interface import content_digest

TRACKS = ("count", "total", "join")
PRACTICE_DOMAINS = (
    (
        "customers",
        "orders",
        "customer_id",
        "city",
        "amount",
        "status",
        ("open", "shipped", "returned"),
        ("lisbon", "oslo", "quito", "perth", "dakar"),
    ),
    (
        "authors",
        "books",
        "author_id",
        "country",
        "pages",
        "format",
        ("paper", "ebook", "audio"),
        ("peru", "chad", "fiji", "laos", "mali"),
    ),
)
HELDOUT_DOMAINS = (
    (
        "patients",
        "visits",
        "patient_id",
        "ward",
        "cost",
        "outcome",
        ("discharged", "admitted", "referred"),
        ("north", "south", "east", "west", "annex"),
    ),
    (
        "stations",
        "readings",
        "station_id",
        "region",
        "rainfall",
        "quality",
        ("good", "suspect", "missing"),
        ("coast", "delta", "ridge", "plain", "basin"),
    ),
)
PITFALL_PROBABILITY = 0.5


def _rows_sql(table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    values = ",\n".join("(" + ", ".join(repr(v) if isinstance(v, str) else str(v) for v in row) + ")" for row in rows)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES\n{values};\n"


def _script(domain: tuple[Any, ...], parents: list[tuple[Any, ...]], children: list[tuple[Any, ...]]) -> str:
    parent, child, fk, cat, num, status = domain[:6]
    return (
        f"CREATE TABLE {parent} (id INTEGER PRIMARY KEY, name TEXT, {cat} TEXT);\n"
        f"CREATE TABLE {child} (id INTEGER PRIMARY KEY, {fk} INTEGER, {num} INTEGER, {status} TEXT);\n"
        + _rows_sql(parent, ("id", "name", cat), parents)
        + _rows_sql(child, ("id", fk, num, status), children)
    )


def generate(track: str, seed: int, heldout: bool) -> dict[str, Any]:
    """The task content of (track, seed): question, gold and naive queries, tables, full and sample database SQL."""
    rng = random.Random(seed)
    domain = rng.choice(HELDOUT_DOMAINS if heldout else PRACTICE_DOMAINS)
    parent, child, fk, cat, num, status, statuses, cats = domain
    upper = rng.random() < PITFALL_PROBABILITY
    shown = (lambda v: v.upper()) if upper else (lambda v: v)
    parents = [
        (i, f"{parent[:3]}{rng.randint(100, 999)}", shown(rng.choice(cats))) for i in range(1, rng.randint(4, 7))
    ]
    children = [
        (i, rng.choice(parents)[0], rng.randint(1, 90), shown(rng.choice(statuses)))
        for i in range(1, rng.randint(14, 22))
    ]
    target = rng.choice(children)
    owner = next(p for p in parents if p[0] == target[1])
    if track == "count":
        value = target[3]
        question = f"How many {child} have {status} '{value.lower()}'?"
        where, tables = f"{status} = '{{v}}'", (child,)
        template = f"SELECT COUNT(*) FROM {child} WHERE {where}"
    elif track == "total":
        value = target[3]
        question = f"What is the total {num} of the {child} whose {status} is '{value.lower()}'?"
        tables = (child,)
        template = f"SELECT SUM({num}) FROM {child} WHERE {status} = '{{v}}'"
    elif track == "join":
        value = owner[2]
        question = f"How many {child} belong to {parent} whose {cat} is '{value.lower()}'?"
        tables = (child, parent)
        template = (
            f"SELECT COUNT(*) FROM {child} JOIN {parent} ON {child}.{fk} = {parent}.id WHERE {parent}.{cat} = '{{v}}'"
        )
    else:
        raise ValueError(f"unknown track {track!r}; valid: {list(TRACKS)}")
    sample_children = sorted({target, *children[:4]})
    sample_parents = sorted({p for p in parents if p[0] in {c[1] for c in sample_children}})
    data = {
        "track": track,
        "question": question,
        "gold": template.replace("{v}", value),
        "naive": template.replace("{v}", value.lower()),
        "tables": list(tables),
        "pitfall": "case" if upper else "",
        "full_sql": _script(domain, parents, children),
        "sample_sql": _script(domain, sample_parents, sample_children),
    }
    data["digest"] = content_digest([data["question"], data["gold"], data["full_sql"]])
    return data
