import Foundation
import LinuxIO
import SystemPackage
import Testing

@Suite(.timeLimit(.minutes(5))) struct BlockingReadTests {
    // Pipes from LinuxIO, written with FileIO (Foundation's FileHandle.write ends the process on a write error).
    @Test func readsAPipeToItsEnd() throws {
        let pipe = try ChildProcess.makePipe()
        defer { try? FileIO.close(pipe.read) }
        let payload = [UInt8](repeating: 0xA5, count: 200_000)  // more than one chunk and more than a pipe holds
        let writer = Thread {
            try? FileIO.writeAll(pipe.write, payload)
            try? FileIO.close(pipe.write)
        }
        writer.start()
        let read = try BlockingRead.toEnd(fd: pipe.read)
        #expect(read == payload)
        #expect(try BlockingRead.chunk(fd: pipe.read).isEmpty)  // end of file stays
    }

    @Test func aChunkIsWhatHasArrived() throws {
        let pipe = try ChildProcess.makePipe()
        defer {
            try? FileIO.close(pipe.read)
            try? FileIO.close(pipe.write)
        }
        try FileIO.writeAll(pipe.write, [1, 2, 3])
        #expect(try BlockingRead.chunk(fd: pipe.read, maximum: 2) == [1, 2])
        #expect(try BlockingRead.chunk(fd: pipe.read) == [3])
    }

    @Test func aClosedDescriptorIsATypedErrorNotACrash() {
        #expect(throws: Errno.badFileDescriptor) { try BlockingRead.chunk(fd: -1) }
    }
}
