import DFUCore

extension DFUError {
    /// The error's line for a user, with how to go on when the upload on the device is resumable: a stop at a safe
    /// point (`.stopped`) continues with `bledfu resume`; a lost link, a timeout, a transport failure or an unconfirmed
    /// end keeps the journal, so it can continue later (and says when reconnecting was turned off). Any other error
    /// (a refused package, a wrong device) gets no hint: resuming would fail the same way.
    ///
    /// - Parameters:
    ///   - device: the address (or the name) the update last connected to.
    ///   - adapter: `--adapter` as given; `any` is the default and is left out of the hint.
    ///   - reconnectAttempts: the update's reconnect attempts per lost link (0: it never tried).
    public func messageWithContinuation(device: String, adapter: String, reconnectAttempts: Int) -> String {
        let hint = "bledfu resume --device \(device)" + (adapter == "any" ? "" : " --adapter \(adapter)")
        switch code {
        case .stopped:
            return message + "; continue with: \(hint)"
        case .linkLost, .timeout, .transport, .unconfirmed:
            return message + (reconnectAttempts == 0 ? " (--reconnect-attempts 0)" : "") + "; continue later with: \(hint)"
        default:
            return message
        }
    }
}
