import Batch
import Foundation
import LinuxIO

/// With `--json`, `bledfu flash` writes its events for a reader: the batch station that started it. When that reader
/// is gone (the station was killed), nobody will record what this flash does, and once the station's lease runs out
/// another station may take the device over: so the flash stops at once rather than at its next event write (which
/// may be many seconds away while it scans or connects). The device keeps the old image, the new one, or a
/// resumable upload, as after any kill.
enum ReaderWatch {
    static func start() {
        let thread = Thread {
            guard PipeReaderWatch.waitUntilReaderGone(fd: 1) else { return }
            Console.errorRaw("bledfu: the reader of the --json events is gone (its station stopped); stopping")
            exit(BledfuExit.interrupted)
        }
        thread.name = "bledfu-reader-watch"
        thread.start()
    }
}
