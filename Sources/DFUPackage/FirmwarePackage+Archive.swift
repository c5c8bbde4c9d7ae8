extension FirmwarePackage {
    /// The package again as a zip with only the parts of `kinds`: their `.bin` and `.dat` bytes unchanged and a
    /// manifest that names them (nrfutil's layout). The parts of a package one at a time, for devices that take
    /// only some of them.
    public func archive(keeping kinds: Set<PartKind>) throws(PackageError) -> [UInt8] {
        let kept = parts.filter { kinds.contains($0.kind) }
        let entries = kept.map { part in
            var entry = Manifest.Part(
                kind: part.kind, binFile: part.binFile, datFile: part.datFile, sdSize: part.manifestSDSize,
                blSize: part.manifestBLSize)
            entry.initPacketData = manifest.parts.first { $0.kind == part.kind }?.initPacketData
            return entry
        }
        var files: [(name: String, bytes: [UInt8])] = [
            ("manifest.json", Manifest(parts: entries, dfuVersion: manifest.dfuVersion).encoded())
        ]
        for part in kept {
            files.append((part.binFile, part.image))
            files.append((part.datFile, part.initPacketBytes))
        }
        return try ArchiveWriter.archive(files)
    }
}
