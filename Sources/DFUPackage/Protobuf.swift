import Foundation
import SwiftProtobuf

/// The bridge between the generated swift-protobuf messages (`Generated/*.pb.swift`, from `Proto/dfu-cc.proto` and
/// `Proto/dfu-cc-views.proto` by `tools/generate-protobuf`) and the package's value types.
///
/// Wire format (protocol buffers): each field is `varint(number << 3 | wire type)` then a varint (type 0), 8 bytes
/// (1), `varint(length)` + bytes (2: sub-messages, bytes, packed repeated scalars) or 4 bytes (5).
///
/// Decoding is `partial` (proto2 `required` fields are checked by the callers, with messages naming the field) and
/// follows protobuf's rules: unknown fields are skipped, a known field that arrives with another wire type is kept as
/// an unknown field (as nrfutil's Python protobuf does), repeated scalars may be packed or not, the last value of
/// a repeated singular field wins. Encoding writes fields in field-number order (as nrfutil's Python protobuf
/// does), every field that is set, zeros included.
enum Protobuf {
    /// Decodes `bytes` as `M`; a malformed message is `.invalidInitPacket` naming `context`.
    static func decode<M: SwiftProtobuf.Message>(_: M.Type, _ bytes: [UInt8], _ context: String) throws(PackageError) -> M {
        do {
            return try M(serializedBytes: bytes, partial: true)
        } catch let error as BinaryDecodingError {
            let reason =
                switch error {
                case .truncated: "truncated"
                case .malformedProtobuf: "malformed protobuf"
                case .messageDepthLimit: "nested too deeply"
                default: "\(error)"
                }
            throw PackageError(.invalidInitPacket, "\(context): \(reason) (\(bytes.count) bytes)")
        } catch {
            throw PackageError(.invalidInitPacket, "\(context): does not decode (\(error))")
        }
    }

    static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, _ data: Data, _ context: String) throws(PackageError) -> M {
        try decode(type, Array(data), context)
    }

    /// The serialized message. Only messages built here are serialized, and partial encoding of them cannot fail.
    static func encode(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        do {
            return try message.serializedBytes(partial: true)
        } catch {
            preconditionFailure("swift-protobuf failed to encode \(type(of: message)): \(error)")
        }
    }

    /// The enum fields (numbers 1 and 4) a proto2 closed enum left in `unknownFields`: values newer than the schema.
    static func unknownEnums(_ unknown: UnknownStorage, _ context: String) throws(PackageError) -> Dfu_EnumFieldsView {
        guard !unknown.data.isEmpty else { return Dfu_EnumFieldsView() }
        return try decode(Dfu_EnumFieldsView.self, unknown.data, context)
    }

    /// Puts an enum value that the closed proto2 enum cannot hold into `message` as an unknown field (it is written
    /// after the known fields).
    static func setUnknownEnum<M: SwiftProtobuf.Message>(_ message: inout M, field: Int, _ value: UInt32) {
        var view = Dfu_EnumFieldsView()
        if field == 4 { view.field4 = value } else { view.field1 = value }
        do {
            try message.merge(serializedBytes: encode(view), partial: true)
        } catch {
            preconditionFailure("swift-protobuf failed to merge an enum field: \(error)")
        }
    }
}
