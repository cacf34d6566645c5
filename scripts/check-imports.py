#!/usr/bin/env python3
"""Checks that every target's imports and its dependencies in Package.swift agree
(docs/architecture.md): a module a target imports must be one of its declared dependencies
(not reached through another's), and a declared dependency must be imported somewhere in the
target. Reads the manifest with `swift package dump-package`; prints each mismatch as
`Package.swift: <target>: …` and exits 1 if there is any.

    scripts/check-imports.py [--manifest dump.json]
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Modules of the toolchain and the system, never declared.
SYSTEM = {"Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization",
          "XCTest", "Testing", "_Concurrency", "os", "Observation", "RegexBuilder", "FoundationXML"}
# Products whose module has another name, and products that bring more than one module.
PRODUCT_MODULES = {
    "CryptoExtras": {"_CryptoExtras", "CryptoExtras"},
    "_CryptoExtras": {"_CryptoExtras", "CryptoExtras"},
}

IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:package\s+|public\s+|internal\s+|private\s+|fileprivate\s+)?import\s+"
                    r"(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)


def manifest(path):
    if path:
        return json.load(open(path))
    dump = subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(dump.stdout)


def target_folder(target):
    if target.get("path"):
        return os.path.join(ROOT, target["path"])
    kind = "Tests" if target["type"] == "test" else "Sources"
    return os.path.join(ROOT, kind, target["name"])


def imports_of(folder):
    """Module → the first file that imports it, for the Swift files under `folder`."""
    found = {}
    for directory, _, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(directory, name)
            text = open(path, encoding="utf-8").read()
            # Code under `#if FUZZING` and the like is imported all the same.
            for module in IMPORT.findall(text):
                found.setdefault(module, os.path.relpath(path, ROOT))
    return found


def declared(target):
    modules = set()
    for dependency in target["dependencies"]:
        if "byName" in dependency:
            modules.add(dependency["byName"][0])
        elif "target" in dependency:
            modules.add(dependency["target"][0])
        elif "product" in dependency:
            name = dependency["product"][0]
            modules |= PRODUCT_MODULES.get(name, {name})
    return modules


def architecture_lists():
    """Module → the set of modules docs/architecture.md says it imports (its `→` list; Core and
    Store short for MidtierCore and MidtierStore); None for "all of the above"."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    block = text.split("## Modules and what each may import", 1)[1].split("```", 2)[1]
    entries, current = {}, None
    for line in block.splitlines():
        if line and not line[0].isspace():
            current = line.split()[0]
            entries[current] = ""
        if current and "→" in line:
            # The last arrow: a description may have one of its own.
            entries[current] += line.rsplit("→", 1)[1]
        elif current and entries[current] and line.strip():
            # A continuation of the arrow list, right below it.
            entries[current] += " " + line.strip()
    lists = {}
    for module, listed in entries.items():
        listed = listed.strip()
        if not listed:
            continue  # no arrow: the page says nothing of its imports (midtier, midtier-bench)
        if "all of the above" in listed:
            lists[module] = None
            continue
        if "no Midtier module" in listed:
            lists[module] = set()
            continue
        names = {name.strip().rstrip(".") for name in listed.split(",") if name.strip()}
        lists[module] = {{"Core": "MidtierCore", "Store": "MidtierStore"}.get(name, name) for name in names} - {"MidtierJSON"}
    return lists


def main():
    path = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--manifest" else None
    package = manifest(path)
    problems = []
    # docs/architecture.md's import lists, against the manifest (Midtier's own modules only;
    # MidtierJSON is left out of the lists, as the page says).
    local = {target["name"] for target in package["targets"]}
    documented = architecture_lists()
    for target in package["targets"]:
        if target["type"] in ("system", "test", "binary", "plugin", "macro") or target["name"] not in documented:
            continue
        listed = documented[target["name"]]
        if listed is None:
            continue
        deps = {d for d in declared(target) if d in local and d != "MidtierJSON"}
        if deps != listed:
            problems.append(f"docs/architecture.md: {target['name']}: lists {', '.join(sorted(listed)) or 'nothing'}; "
                            f"Package.swift gives {', '.join(sorted(deps)) or 'nothing'}")
    for target in package["targets"]:
        if target["type"] in ("system", "binary", "plugin", "macro"):
            continue
        name = target["name"]
        imported = imports_of(target_folder(target))
        deps = declared(target)
        for module, where in sorted(imported.items()):
            if module in SYSTEM or module == name or module in deps:
                continue
            problems.append(f"Package.swift: {name}: imports {module} ({where}) without declaring it")
        for dependency in target["dependencies"]:
            if "product" in dependency:
                product = dependency["product"][0]
                if not (PRODUCT_MODULES.get(product, {product}) & set(imported)):
                    problems.append(f"Package.swift: {name}: declares the product {product} but no file imports it")
            else:
                module = (dependency.get("byName") or dependency.get("target"))[0]
                if module not in imported:
                    problems.append(f"Package.swift: {name}: declares {module} but no file imports it")
    for problem in problems:
        print(problem)
    print(f"check-imports: {len(problems)} mismatch(es) in {len(package['targets'])} targets")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
