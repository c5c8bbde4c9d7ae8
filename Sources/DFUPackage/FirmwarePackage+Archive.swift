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

extension FirmwarePackage {
    /// A package of one image and its init packet, for devices whose files come without a zip (as the Android DFU
    /// library takes them): the zip (manifest, `.bin`, `.dat`, nrfutil's layout) with the image under the manifest
    /// key its Secure init command names (APPLICATION and EXTERNAL_APPLICATION: application; SOFTDEVICE;
    /// BOOTLOADER; SOFTDEVICE_BOOTLOADER with the command's sizes). A Legacy init packet names no type: its image is
    /// the application. Reproducible: the same files give the same bytes (so the same journal key).
    public static func archive(image: [UInt8], initPacket: [UInt8]) throws(PackageError) -> [UInt8] {
        guard !image.isEmpty else { throw PackageError(.invalidInput, "the image is empty") }
        let decoded: InitPacket
        do {
            decoded = try InitPacket(decoding: initPacket)
        } catch {
            throw PackageError(.invalidInitPacket, "the init packet does not decode: \(error.message)")
        }
        var kind = PartKind.application
        var sizes: (sd: UInt32?, bl: UInt32?) = (nil, nil)
        if case .secure(let secure) = decoded, let type = secure.command.type {
            switch type {
            case .application, .externalApplication: kind = .application
            case .softdevice: kind = .softdevice
            case .bootloader: kind = .bootloader
            case .softdeviceBootloader:
                kind = .softdeviceBootloader
                sizes = (secure.command.sdSize, secure.command.blSize)
            default: throw PackageError(.invalidInitPacket, "the init command names an unknown firmware type \(type)")
            }
        }
        let stem = kind == .softdeviceBootloader ? "sd_bl" : kind.rawValue
        let part = Manifest.Part(kind: kind, binFile: "\(stem).bin", datFile: "\(stem).dat", sdSize: sizes.sd, blSize: sizes.bl)
        return try ArchiveWriter.archive([
            ("manifest.json", Manifest(parts: [part]).encoded()), (part.binFile, image), (part.datFile, initPacket),
        ])
    }
}
