import ArgumentParser
import Foundation
import MCUmgr

/// `bledfu smp echo TEXT`: OS echo (id 0): the device answers the text (mcumgr's `echo`); a check that SMP works
/// end to end, with the round trip's time.
struct SMPEcho: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo", abstract: "Send TEXT to the device's OS echo and print its answer and the round trip time.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "The text to echo (at most 256 bytes).") var text: String

    func validate() throws {
        guard text.utf8.count <= 256 else { throw ValidationError("the text is \(text.utf8.count) bytes; at most 256") }
    }

    func run() async throws {
        let text = self.text
        let clock = ContinuousClock()
        let (answer, elapsed) = try await withSMPClient(options, device) { client throws(SMPError) in
            let start = clock.now
            let answer = try SMPEchoResponse(body: try await client.send(.echo(text))).text
            guard answer == text else { throw SMPError(.protocolViolation, "the device echoed \"\(answer)\" for \"\(text)\"") }
            return (answer, start.duration(to: clock.now))
        }
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        if options.json {
            Console.json(["event": "echo", "text": answer, "milliseconds": (milliseconds * 10).rounded() / 10])
        } else {
            print("\(answer)  (\(String(format: "%.1f", milliseconds)) ms)")
        }
    }
}
