import DFUPackage

extension DFUPart {
    /// A package part as the engine sends it: the `.dat` bytes exactly as in the archive, the image, and the
    /// init command's `fw_version` (for "firmware version too low" errors).
    public init(_ part: PackagePart) {
        self.init(
            name: part.kind.description, initPacket: part.initPacketBytes, image: part.image,
            firmwareVersion: part.initCommand?.fwVersion)
    }

    /// The parts of a package in sending order (system part first, then the application), one connection each.
    public static func parts(of package: FirmwarePackage) -> [DFUPart] { package.parts.map(DFUPart.init) }
}
