#!/usr/bin/env python3
"""The package's module graph, read from `swift package describe --type json` (tools/check-layers runs it).

Fails when
  - a target depends on a target its layer may not use (LAYERS, RULES below; every target must be listed),
  - a test target depends on a target it may not use (TEST_EDGES below; every test target must be listed): its
    subject, what lies in a lower layer than its subject, the test support, and the peers listed for it,
  - a target imports a module of the package or of a dependency it does not declare (an undeclared dependency:
    SwiftPM lets transitive modules through, the graph would lie),
  - a target declares a dependency none of its sources imports (a dead dependency).
  - docs/architecture.md's module table (between `<!-- modules:begin -->` and `<!-- modules:end -->`) lacks a
    target, lists one the package does not have, or its "Imports" column differs from the declared dependencies.
Usage: check-layers.py DESCRIBE.json [--write-docs]   (the JSON of `swift package describe --type json`;
       --write-docs rewrites the table's layer and imports columns from the graph, keeping what each module owns)
"""
import json
import os
import re
import sys

# Each library/executable target's layer: a target may depend only on targets of a lower layer (docs/architecture.md).
LAYERS = {
    "CBlueZShim": 0, "CLinuxShim": 0, "CBuildInfo": 0, "CBOR": 0, "FuzzSupport": 0,
    "BLECore": 1,
    "ATT": 2, "DFUProtocol": 2, "CBOR": 2,
    "GATT": 3, "DFUPackage": 3, "TestDoubles": 3,
    "DFUCore": 4, "MCUbootImage": 4, "LinuxIO": 4,
    "SecureDFU": 5, "LegacyDFU": 5, "MCUmgr": 5, "VirtualRadio": 5, "BlueZTransport": 5,
    "DFUSimulator": 6,
    "BledfuKit": 7, "SimulatorHost": 7, "BledfuTestSupport": 7,
    "Batch": 8,
    "LineStore": 9, "LineDashboard": 9, "Bench": 9,
    "BledfuCLI": 10, "FlashVirtualDevice": 10, "FuzzPackage": 10, "FuzzInitPacket": 10, "FuzzATT": 10,
    "FuzzATTClient": 10, "FuzzSecureDFU": 10, "FuzzCBOR": 10, "FuzzPlan": 10, "FuzzLegacyDFU": 10,
    "FuzzFaultCampaign": 10, "CoreBenchmarks": 10,
    "bledfu": 11,
}
# The pure core: no syscalls, no transport, no C shim (check-layers also greps their imports).
CORE = {"BLECore", "ATT", "GATT", "DFUCore", "DFUProtocol", "DFUPackage", "SecureDFU", "LegacyDFU", "DFUSimulator",
        "CBOR", "MCUbootImage", "MCUmgr"}
IO = {"LinuxIO", "VirtualRadio", "BlueZTransport", "CBlueZShim", "CLinuxShim", "SystemPackage"}
FAMILIES = {"SecureDFU", "LegacyDFU", "MCUmgr"}
TESTS = set()  # filled in main() from the describe output
# Each test target: the targets it tests (its subjects) and the peers it may use besides them, what lies below them
# and the test support: the simulator as the device on the other end, the transports for real sockets, the
# executables it runs. Any other edge of a test target fails.
TEST_SUPPORT = {"TestDoubles", "BledfuTestSupport"}
TEST_EDGES = {
    "BLECoreTests": ({"BLECore"}, set()),
    "ATTTests": ({"ATT"}, set()),
    "GATTTests": ({"GATT"}, {"VirtualRadio"}),
    "TransportTests": ({"LinuxIO", "VirtualRadio", "BlueZTransport"}, {"CBlueZShim"}),
    "DFUCoreTests": ({"DFUCore"}, set()),
    "DFUProtocolTests": ({"DFUProtocol"}, set()),
    "DFUPackageTests": ({"DFUPackage"}, set()),
    "CBORTests": ({"CBOR"}, set()),
    "MCUbootImageTests": ({"MCUbootImage"}, {"LinuxIO"}),
    "SecureDFUTests": ({"SecureDFU"}, {"DFUSimulator"}),
    "LegacyDFUTests": ({"LegacyDFU"}, {"DFUSimulator", "VirtualRadio"}),
    "MCUmgrTests": ({"MCUmgr"}, {"DFUSimulator"}),
    "DFUSimulatorTests": ({"DFUSimulator"}, set()),
    "BatchTests": ({"Batch"}, set()),
    "LineStoreTests": ({"LineStore"}, set()),
    "LineDashboardTests": ({"LineDashboard"}, set()),
    "BenchTests": ({"Bench"}, set()),
    "SimulatorHostTests": ({"SimulatorHost"}, set()),
    "BledfuKitTests": ({"BledfuKit"}, set()),
    "CLITests": ({"BledfuCLI", "bledfu", "FlashVirtualDevice"}, {"LineStore"}),
}
# Edges forbidden although the layers would allow them.
RULES = [
    (lambda t, d: t in CORE and d in IO, "the core makes no syscalls"),
    (lambda t, d: d == "CBlueZShim" and t not in {"BlueZTransport", "TransportTests"},
     "only BlueZTransport links libbluetooth"),
    (lambda t, d: t in FAMILIES and d in FAMILIES, "a family does not depend on another family"),
    (lambda t, d: t in FAMILIES | {"DFUCore"} and d in {"BledfuKit", "Batch"}, "families sit below the updater"),
    (lambda t, d: t == "FlashVirtualDevice" and d not in {"BledfuKit", "VirtualRadio"},
     "the library example uses the public products only"),
    (lambda t, d: d == "TestDoubles" and t not in TESTS and t != "BledfuTestSupport",
     "test doubles are for tests (and BledfuTestSupport) only"),
    (lambda t, d: t == "BledfuKit" and d in {"DFUSimulator", "BledfuTestSupport", "VirtualRadio", "BlueZTransport"},
     "the updater does not know the simulator or a transport"),
]
# Modules of the toolchain and the OS: imported without a declared dependency.
SYSTEM = {"Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch",
          "Synchronization", "Testing", "XCTest", "_Concurrency", "Swift", "os", "ucrt", "WinSDK", "Android"}
# A product whose module has another name.
PRODUCT_MODULES = {}

IMPORT = re.compile(r"^\s*(?:@testable\s+|@_exported\s+|@preconcurrency\s+|@_implementationOnly\s+|"
                    r"(?:public|package|internal|private|fileprivate)\s+)*import\s+"
                    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let|actor)\s+)?([A-Za-z_][A-Za-z0-9_]*)",
                    re.M)
C_INCLUDE = re.compile(r'^\s*#\s*include\s+"', re.M)


def imports_of(root, target):
    found = set()
    directory = os.path.join(root, target["path"])
    for base, _, files in os.walk(directory):
        for name in files:
            if name.endswith(".swift"):
                with open(os.path.join(base, name), encoding="utf-8", errors="replace") as handle:
                    found.update(IMPORT.findall(handle.read()))
    return found


# Products in the docs' "Imports" column by their package's name.
PACKAGE_OF_PRODUCT = {
    "Logging": "swift-log", "SystemPackage": "swift-system", "Crypto": "swift-crypto", "_CryptoExtras": "swift-crypto",
    "SwiftProtobuf": "swift-protobuf", "ArgumentParser": "swift-argument-parser", "NIOCore": "swift-nio",
    "NIOPosix": "swift-nio", "HTTPTypes": "swift-http-types", "Hummingbird": "hummingbird", "PostgresNIO": "postgres-nio",
    "GRDB": "GRDB", "Yams": "Yams", "ZIPFoundation": "ZIPFoundation", "Benchmark": "package-benchmark",
}
DOCS = "docs/architecture.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"


def imports_column(target):
    """The declared dependencies of a target as the docs list them: targets, then packages, sorted, no duplicates."""
    deps = sorted(target.get("target_dependencies", []))
    packages = sorted({PACKAGE_OF_PRODUCT.get(p, p) for p in target.get("product_dependencies", [])})
    return ", ".join(f"`{d}`" for d in deps + packages) or "—"


def docs_table(root, targets, write):
    """Checks (or rewrites) docs/architecture.md's module table against the graph."""
    path = os.path.join(root, DOCS)
    text = open(path, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        return [f"{DOCS}: no {BEGIN} … {END} module table"]
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    rows = {}
    for line in text[start:stop].strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4:
            rows[cells[0].strip("`")] = cells
    problems = []
    wanted = sorted((t for t in targets.values() if t.get("type") != "test"), key=lambda t: (LAYERS.get(t["name"], 99), t["name"]))
    lines = ["| Module | Layer | Owns | Imports (declared dependencies) |", "|---|---|---|---|"]
    for target in wanted:
        name = target["name"]
        row = rows.pop(name, None)
        owns = row[2] if row else "(describe what it owns)"
        expected = imports_column(target)
        if row is None:
            problems.append(f"{DOCS}: the module table has no row for {name}")
        elif row[3] != expected or row[1] != str(LAYERS.get(name)):
            problems.append(f"{DOCS}: {name}'s row says layer {row[1]}, imports {row[3]}; the graph: {LAYERS.get(name)}, {expected}")
        lines.append(f"| `{name}` | {LAYERS.get(name)} | {owns} | {expected} |")
    for name in rows:
        problems.append(f"{DOCS}: the module table lists {name}, which is no target of the package")
    if write:
        open(path, "w", encoding="utf-8").write(text[:start] + "\n" + "\n".join(lines) + "\n" + text[stop:])
        return []
    return problems


def test_edges(name, deps):
    """The edges of test target `name` that TEST_EDGES does not allow."""
    if name not in TEST_EDGES:
        return [f"{name}: not in tools/check-layers.py's TEST_EDGES (name what it tests)"]
    subjects, peers = TEST_EDGES[name]
    ceiling = max(LAYERS.get(subject, 0) for subject in subjects)
    problems = []
    for dep in sorted(deps):
        if dep in subjects or dep in peers or dep in TEST_SUPPORT or LAYERS.get(dep, 99) < ceiling:
            continue
        problems.append(f"{name} -> {dep}: not its subject, below it, test support or a listed peer (TEST_EDGES)")
    for subject in sorted(subjects - deps):
        problems.append(f"{name}: does not depend on its subject {subject} (TEST_EDGES)")
    return problems


def main():
    describe = json.load(open(sys.argv[1]))
    root = describe.get("path", ".")
    targets = {t["name"]: t for t in describe["targets"]}
    TESTS.update(name for name, target in targets.items() if target.get("type") == "test")
    products = set()
    for target in describe["targets"]:
        products.update(target.get("product_dependencies", []))
    problems = []
    for name, target in sorted(targets.items()):
        is_test = target.get("type") == "test"
        if not is_test and name not in LAYERS:
            problems.append(f"{name}: not in tools/check-layers.py's LAYERS (give it a layer)")
            continue
        deps = set(target.get("target_dependencies", []))
        product_deps = set(target.get("product_dependencies", []))
        if is_test:
            problems += test_edges(name, deps)
        for dep in sorted(deps):
            if not is_test and LAYERS.get(dep, 99) >= LAYERS[name]:
                problems.append(f"{name} (layer {LAYERS[name]}) -> {dep} (layer {LAYERS.get(dep)}): not a lower layer")
            if is_test and targets.get(dep, {}).get("type") == "test":
                problems.append(f"{name} -> {dep}: a test target depends on another test target")
        for dep in sorted(deps | product_deps):
            for rule, why in RULES:
                if rule(name, dep):
                    problems.append(f"{name} -> {dep}: {why}")
        if target.get("c99name") and target.get("module_type") == "ClangTarget":
            continue
        if target.get("module_type") not in (None, "SwiftTarget"):
            continue
        imported = imports_of(root, target)
        declared_modules = deps | {PRODUCT_MODULES.get(p, p) for p in product_deps}
        known = set(targets) | {PRODUCT_MODULES.get(p, p) for p in products}
        for module in sorted(imported - SYSTEM):
            if module == name:
                continue
            if module in known and module not in declared_modules:
                problems.append(f"{name} imports {module} but does not declare it (undeclared dependency)")
        for module in sorted(declared_modules - imported):
            if module == "bledfu" or targets.get(module, {}).get("type") == "executable" and is_test:
                continue  # a test target runs an executable it depends on; it does not import it
            problems.append(f"{name} declares {module} but no source imports it (dead dependency)")
    problems += docs_table(root, targets, "--write-docs" in sys.argv[2:])
    for problem in problems:
        print("check-layers: " + problem, file=sys.stderr)
    if problems:
        return 1
    print(f"check-layers: ok ({len(targets)} targets: layers, rules, no dead or undeclared dependency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
