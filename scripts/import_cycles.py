"""Print the import circles of specbench_lib (module- and function-level imports, via grimp).

    python scripts/import_cycles.py            # circles and each edge inside them; exit 1 if any
    python scripts/import_cycles.py --levels   # each module's level: 0 imports no sibling
"""
from __future__ import annotations

import sys

import grimp

PKG = "specbench_lib"


def _graph() -> dict[str, set[str]]:
    g = grimp.build_graph(PKG)
    return {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative enough)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return out


def main() -> int:
    edges = _graph()
    if "--levels" in sys.argv:
        level: dict[str, int] = {}

        def lv(m: str, seen: frozenset[str] = frozenset()) -> int:
            if m not in level:
                deps = [d for d in edges[m] if d not in seen and d != m]
                level[m] = 1 + max((lv(d, seen | {m}) for d in deps), default=-1)
            return level[m]

        for m in sorted(edges, key=lambda m: (lv(m), m)):
            print(lv(m), m)
    found = circles(edges)
    for comp in found:
        print("circle:", ", ".join(c.removeprefix(PKG + ".") for c in comp))
        for a in comp:
            for b in sorted(edges[a] & set(comp)):
                print(f"   {a.removeprefix(PKG + '.')} -> {b.removeprefix(PKG + '.')}")
    print(f"{len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
