"""Fails on any import cycle among the modules of the package chorus.

Reads the sources (python/chorus/**/*.py) with ast, imports nothing: every
import statement counts, at any depth (a function's late import is still a
dependency), relative or absolute. `from P import N` depends on the module
P.N where that is a module of the package, else on P (N is a name P
defines); importing a module also runs the packages around it, those the
importer sits in aside (they are being imported already). A module's import of a package it sits in is counted like any
other; the extensions (chorus._chorus, chorus.torch._backend) have no
source here and are left out.

Usage: import_cycles.py PACKAGE_DIR   (the directory of chorus/__init__.py)
"""
import ast
import pathlib
import sys


def modules(package_dir):
    """{dotted name: (path, is_package)} for every .py file of the package."""
    root = package_dir.parent
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def imported(name, is_package, tree, known):
    """The package's modules that the module `name` imports, with the line of each."""
    # The package a relative import starts from: a package's own name, a module's parent.
    here = name.split(".") if is_package else name.split(".")[:-1]
    edges = []

    def add(target, line):
        # Modules with no source here (the extensions, other packages) import none of ours.
        if target not in known:
            return
        edges.append((target, line))
        # Importing a.b.c runs a.b's __init__ first, unless a.b is a package this module sits in
        # (being imported already, then).
        parts = target.split(".")
        for end in range(1, len(parts)):
            package = ".".join(parts[:end])
            if parts[:end] != here[:end] and package in known:
                edges.append((package, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                if node.level - 1 > len(here):
                    continue
                base = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                child = f"{base}.{alias.name}"
                add(child if child in known else base, node.lineno)
    return edges


def cycles(graph):
    """One cycle, as a list of modules, for each strongly connected component that has one (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(path_within(graph, component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def path_within(graph, component):
    """A shortest cycle through the component's first module, staying inside it."""
    start = min(component)
    previous = {start: None}
    queue = [start]
    for node in queue:
        for target in sorted(graph[node]):
            if target == start:
                path = [node]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if target in component and target not in previous:
                previous[target] = node
                queue.append(target)
    return sorted(component)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    package_dir = pathlib.Path(sys.argv[1]).resolve()
    known = modules(package_dir)
    graph, lines = {}, {}
    for name, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = set()
        for target, line in imported(name, is_package, tree, known):
            graph[name].add(target)
            lines.setdefault((name, target), line)
    found = cycles(graph)
    for cycle in found:
        steps = [f"{source} (line {lines[(source, target)]})" for source, target in zip(cycle, cycle[1:])]
        print("import cycle: " + " -> ".join(steps + [cycle[-1]]))
    edges = sum(len(targets) for targets in graph.values())
    print(f"{len(known)} modules, {edges} imports among them, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
