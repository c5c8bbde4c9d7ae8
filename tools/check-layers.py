#!/usr/bin/env python3
"""The package's module graph, read from `swift package describe --type json` (tools/check-layers runs it).

Fails when
  - a target depends on a target its layer may not use (LAYERS, RULES below; every target must be listed),
  - a target imports a module of the package or of a dependency it does not declare (an undeclared dependency:
    SwiftPM lets transitive modules through, the graph would lie),
  - a target declares a dependency none of its sources imports (a dead dependency).
Usage: check-layers.py DESCRIBE.json   (the JSON of `swift package describe --type json`)
"""
import json
import os
import re
import sys

# Each library/executable target's layer: a target may depend only on targets of a lower layer (docs/architecture.md).
LAYERS = {
    "CBlueZShim": 0, "CLinuxShim": 0, "CBuildInfo": 0, "CBOR": 0, "FuzzSupport": 0,
    "BLECore": 1,
    "ATT": 2, "DFUProtocol": 2,
    "GATT": 3, "DFUPackage": 3,
    "DFUCore": 4, "MCUbootImage": 4, "LinuxIO": 4,
    "SecureDFU": 5, "LegacyDFU": 5, "MCUmgr": 5, "VirtualRadio": 5, "BlueZTransport": 5,
    "DFUSimulator": 6, "Batch": 6,
    "BledfuKit": 7, "SimulatorHost": 7, "Bench": 7, "BledfuTestSupport": 7, "LineStore": 7, "LineDashboard": 7,
    "BledfuCLI": 8, "FlashVirtualDevice": 8, "FuzzPackage": 8, "FuzzInitPacket": 8, "FuzzATT": 8,
    "FuzzATTClient": 8, "FuzzSecureDFU": 8, "FuzzCBOR": 8, "FuzzPlan": 8, "FuzzLegacyDFU": 8,
    "FuzzFaultCampaign": 8, "CoreBenchmarks": 8,
    "bledfu": 9,
}
# The pure core: no syscalls, no transport, no C shim (check-layers also greps their imports).
CORE = {"BLECore", "ATT", "GATT", "DFUCore", "DFUProtocol", "DFUPackage", "SecureDFU", "LegacyDFU", "DFUSimulator",
        "CBOR", "MCUbootImage", "MCUmgr"}
IO = {"LinuxIO", "VirtualRadio", "BlueZTransport", "CBlueZShim", "CLinuxShim", "SystemPackage"}
FAMILIES = {"SecureDFU", "LegacyDFU", "MCUmgr"}
# Edges forbidden although the layers would allow them.
RULES = [
    (lambda t, d: t in CORE and d in IO, "the core makes no syscalls"),
    (lambda t, d: d == "CBlueZShim" and t not in {"BlueZTransport", "TransportTests"},
     "only BlueZTransport links libbluetooth"),
    (lambda t, d: t in FAMILIES and d in FAMILIES, "a family does not depend on another family"),
    (lambda t, d: t in FAMILIES | {"DFUCore"} and d in {"BledfuKit", "Batch"}, "families sit below the updater"),
    (lambda t, d: t == "FlashVirtualDevice" and d not in {"BledfuKit", "VirtualRadio"},
     "the library example uses the public products only"),
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


def main():
    describe = json.load(open(sys.argv[1]))
    root = describe.get("path", ".")
    targets = {t["name"]: t for t in describe["targets"]}
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
    for problem in problems:
        print("check-layers: " + problem, file=sys.stderr)
    if problems:
        return 1
    print(f"check-layers: ok ({len(targets)} targets: layers, rules, no dead or undeclared dependency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
