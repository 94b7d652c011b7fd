#!/usr/bin/env python3
"""check-layers.py -- every #include "..." of tessera's own C files points down a layer, and no two modules or
folders include each other, directly or round a longer circle.

    python3 scripts/check-layers.py            # the tree this script lives in
    python3 scripts/check-layers.py --graph    # also print the folder-level include graph

A module is a .h with its .c files (model/fit.h + model/fit.c); a folder is the directory a file is in
(extender/mirror). The layers (each top folder's README.md says the same in words):

    model     -> nothing of tessera (libc, cJSON)
    policy    -> model
    kube      -> nothing of tessera (libc, cJSON, libcurl)
    extender  -> policy, model, kube
    sim       -> policy, model
    agent     -> kube
    reserve   -> kube
    shim      -> nothing of tessera (code loaded into users' processes)
    tests     -> anything

A folder not in the table fails the check until it is added here. Module circles are never allowed; a folder
circle only when KNOWN_FOLDER_CIRCLES names it with its reason (none, for now). Ends with "N passed, N failed" (one check per
rule: layers, module circles, folder circles) like the other suites of scripts/run-tests.sh; exit status 1 on any
failure.
"""
import os
import re
import sys

LAYERS = {
    "model": set(),
    "policy": {"model"},
    "kube": set(),
    "extender": {"policy", "model", "kube"},
    "sim": {"policy", "model"},
    "agent": {"kube"},
    "reserve": {"kube"},
    "shim": set(),
    "tests": None,  # anything
}
# Folder circles that are known, each with why it stands and what removes it. Printed on every run; one that no
# longer occurs fails the check too, so the entry goes with the circle.
KNOWN_FOLDER_CIRCLES = {}
SKIP_DIRS = {".git", "build", "build-asan", "build-fuzz", "build-fuzz2"}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
# block comments (an #include in a comment is not an include); string literals do not hold #include lines here
COMMENT = re.compile(r"/\*.*?\*/", re.S)


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, src, inc):
    """The tree path an #include "inc" of src names: next to src first, then from the root (-I.), as the
    compiler looks. None for a file outside the tree (a generated or system header)."""
    for base in (os.path.dirname(src), ""):
        p = os.path.normpath(os.path.join(base, inc))
        if not p.startswith("..") and os.path.isfile(os.path.join(root, p)):
            return p
    return None


def module(path):
    return os.path.splitext(path)[0]


def top(path):
    return path.split(os.sep)[0] if os.sep in path else ""


def circles(edges):
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative), each as a sorted
    list, and for each one circle through it to show."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    result = []
    for comp in sorted(out):
        members = set(comp)
        # a shortest way back to comp[0] from it, inside the component: the circle to show
        prev, frontier, seen = {}, [comp[0]], {comp[0]}
        found = None
        while frontier and not found:
            nxt = []
            for v in frontier:
                for w in sorted(edges.get(v, ())):
                    if w == comp[0]:
                        found = v
                        break
                    if w in members and w not in seen:
                        seen.add(w)
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path = [found]
        while path[-1] != comp[0]:
            path.append(prev[path[-1]])
        result.append((comp, list(reversed(path)) + [comp[0]]))
    return result


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    show_graph = "--graph" in sys.argv[1:]
    bad_args = [a for a in sys.argv[1:] if a != "--graph"]
    if bad_args:
        print("usage: check-layers.py [--graph]", file=sys.stderr)
        return 2
    layer_errors, mod_edges, dir_edges, where = [], {}, {}, {}
    files = list(sources(root))
    for src in files:
        t = top(src)
        if t not in LAYERS:
            layer_errors.append("%s: folder %s/ is in no layer: add it to scripts/check-layers.py's table (and "
                                "say what it may include in %s/README.md)" % (src, t or ".", t or "."))
            continue
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), f.read())
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            dst = resolve(root, src, m.group(1))
            if dst is None:
                continue
            u = top(dst)
            allowed = LAYERS[t]
            if u != t and allowed is not None and u not in allowed:
                may = ("only " + ", ".join(sorted(x + "/" for x in allowed)) + " and itself") if allowed else \
                      "nothing of tessera but itself"
                layer_errors.append("%s:%d: #include \"%s\": %s/ may include %s, not %s/" % (
                    src, line, m.group(1), t, may, u))
            a, b = module(src), module(dst)
            if a != b:
                mod_edges.setdefault(a, set()).add(b)
                where.setdefault((a, b), "%s:%d" % (src, line))
            da, db = os.path.dirname(src), os.path.dirname(dst)
            if da != db:
                dir_edges.setdefault(da, set()).add(db)
                where.setdefault(("dir", da, db), "%s:%d" % (src, line))

    passed = failed = 0

    def report(ok, what, lines):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok - %s" % what)
        else:
            failed += 1
            print("not ok - %s" % what)
            for s in lines:
                print("    " + s)

    report(not layer_errors, "every include points down a layer (%d files)" % len(files), layer_errors)
    lines = []
    for comp, path in circles(mod_edges):
        lines.append("modules %s include each other: %s" % (", ".join(comp), " -> ".join(
            "%s (%s)" % (a, where[(a, b)]) for a, b in zip(path, path[1:])) + " -> " + path[-1]))
    report(not lines, "no include circle among modules (%d modules)" % len(
        {module(f) for f in files}), lines)
    lines, known_seen = [], set()
    for comp, path in circles(dir_edges):
        if frozenset(comp) in KNOWN_FOLDER_CIRCLES:
            known_seen.add(frozenset(comp))
            print("# known circle, folders %s: %s" % (", ".join(x + "/" for x in comp),
                                                     KNOWN_FOLDER_CIRCLES[frozenset(comp)]))
            continue
        lines.append("folders %s include each other: %s" % (", ".join(x + "/" for x in comp), " -> ".join(
            "%s/ (%s)" % (a, where[("dir", a, b)]) for a, b in zip(path, path[1:])) + " -> " + path[-1] + "/"))
    for gone in set(KNOWN_FOLDER_CIRCLES) - known_seen:
        lines.append("the known circle of folders %s is gone: remove it from KNOWN_FOLDER_CIRCLES" % ", ".join(
            sorted(x + "/" for x in gone)))
    report(not lines, "no include circle among folders but the known ones (%d folders)" % len(
        {os.path.dirname(f) for f in files}), lines)
    if show_graph:
        for a in sorted(dir_edges):
            print("# %s/ -> %s" % (a, ", ".join(x + "/" for x in sorted(dir_edges[a]))))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
