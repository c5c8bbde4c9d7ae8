/// The one error shape of bledfu's modules: an open ``code`` (a `RawRepresentable` struct with static members, so
/// codes from a newer version, a journal or a log survive and print), one line for people (``message``) and the
/// error that led to it (``cause``). Equality and hashing are on the code only (the text is for people).
///
/// A conforming struct declares its fields and gets `==`, `hash(into:)` and `description` from here:
///
///     public struct JournalError: CodedError {
///         public struct Code: RawRepresentable, Hashable, Sendable { public var rawValue: String ... }
///         public var code: Code
///         public var message: String
///         public var cause: (any Error)?
///     }
public protocol CodedError: Error, Hashable, CustomStringConvertible {
    associatedtype Code: RawRepresentable & Hashable & Sendable
    /// What went wrong, as a value of an open code space.
    var code: Code { get }
    /// One line naming the cause ("Execute (0x04) refused: insufficient resources").
    var message: String { get }
    /// The lower-level error this one wraps, if any.
    var cause: (any Error)? { get }
}

extension CodedError {
    public var cause: (any Error)? { nil }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// "code: message" (the message alone when it is empty).
    public var description: String {
        let name = "\(code.rawValue)"
        return message.isEmpty ? name : "\(name): \(message)"
    }
}
