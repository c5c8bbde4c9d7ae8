import Foundation
import LinuxIO
import SystemPackage
import Testing

@Suite(.timeLimit(.minutes(5))) struct BlockingReadTests {
    @Test func readsAPipeToItsEnd() throws {
        let pipe = Pipe()
        let payload = [UInt8](repeating: 0xA5, count: 200_000)  // more than one chunk and more than a pipe holds
        let writer = Thread {
            pipe.fileHandleForWriting.write(Data(payload))
            try? pipe.fileHandleForWriting.close()
        }
        writer.start()
        let read = try BlockingRead.toEnd(fd: pipe.fileHandleForReading.fileDescriptor)
        #expect(read == payload)
        #expect(try BlockingRead.chunk(fd: pipe.fileHandleForReading.fileDescriptor).isEmpty)  // end of file stays
    }

    @Test func aChunkIsWhatHasArrived() throws {
        let pipe = Pipe()
        pipe.fileHandleForWriting.write(Data([1, 2, 3]))
        #expect(try BlockingRead.chunk(fd: pipe.fileHandleForReading.fileDescriptor, maximum: 2) == [1, 2])
        #expect(try BlockingRead.chunk(fd: pipe.fileHandleForReading.fileDescriptor) == [3])
    }

    @Test func aClosedDescriptorIsATypedErrorNotACrash() {
        #expect(throws: Errno.badFileDescriptor) { try BlockingRead.chunk(fd: -1) }
    }
}
