import Foundation

/// A failed file operation in bledfu's words: the file and the errno, never Foundation's generic sentence
/// ("The file “app.zip” couldn’t be opened because there is no such file."), issue 19 point 6.
public enum FileProblem {
    /// "cannot read app.zip: no such file or directory (ENOENT)".
    ///
    /// - Parameters:
    ///   - verb: what was tried ("read", "write", "create").
    ///   - error: the error Foundation threw; its POSIX errno is looked up in its underlying error.
    public static func describe(_ verb: String, _ path: String, _ error: any Error) -> String {
        "cannot \(verb) \(path): \(reason(error))"
    }

    /// The errno of a Foundation file error (its NSPOSIXErrorDomain cause), if it has one.
    public static func errno(of error: any Error) -> Int32? {
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain { return Int32(truncatingIfNeeded: nsError.code) }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return Int32(truncatingIfNeeded: underlying.code)
        }
        // Foundation's own codes for the common cases when it gives no underlying errno.
        switch CocoaError.Code(rawValue: nsError.code) {
        case .fileReadNoSuchFile, .fileNoSuchFile: return 2
        case .fileReadNoPermission, .fileWriteNoPermission: return 13
        case .fileWriteOutOfSpace: return 28
        case .fileWriteVolumeReadOnly: return 30
        default: return nil
        }
    }

    /// "no such file or directory (ENOENT)", or "errno 71" for one without words here, or "unknown error".
    public static func reason(_ error: any Error) -> String {
        guard let number = errno(of: error) else { return "unknown error" }
        return words(errno: number)
    }

    /// The words and the symbolic name of an errno a file operation gives.
    public static func words(errno number: Int32) -> String {
        guard let (words, name) = table[number] else { return "errno \(number)" }
        return "\(words) (\(name))"
    }

    private static let table: [Int32: (String, String)] = [
        1: ("operation not permitted", "EPERM"),
        2: ("no such file or directory", "ENOENT"),
        5: ("input/output error", "EIO"),
        13: ("permission denied", "EACCES"),
        17: ("the file already exists", "EEXIST"),
        20: ("a part of the path is not a directory", "ENOTDIR"),
        21: ("it is a directory", "EISDIR"),
        24: ("too many open files", "EMFILE"),
        27: ("the file is too large", "EFBIG"),
        28: ("no space left on the device", "ENOSPC"),
        30: ("the file system is read-only", "EROFS"),
        36: ("the name is too long", "ENAMETOOLONG"),
        40: ("too many symbolic links", "ELOOP"),
    ]
}
