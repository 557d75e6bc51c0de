import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import CachalotServer

@Suite("ConnectionEnd: a connection's task reads and writes through it, with back-pressure")
struct ConnectionEndTests {
    private struct Failure: Error, Equatable {}

    /// A channel whose reads are counted as they reach it.
    private func channel() throws -> (EmbeddedChannel, ConnectionEnd, ServerCodecTests.ReadCounter) {
        let counter = ServerCodecTests.ReadCounter()
        let end = ConnectionEnd()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([counter, end])
        return (channel, end, counter)
    }

    private func piece(_ text: String) -> ServerRequestPart {
        .body(ByteBuffer(string: text))
    }

    private func text(_ taken: Result<ServerRequestPart?, any Error>?) -> String {
        switch taken {
        case nil: "nothing"
        case .success(nil): "end of input"
        case .success(.body(let bytes)): String(buffer: bytes)
        case .success(.some): "another part"
        case .failure(let error): "\(error)"
        }
    }

    @Test("reading stops while ten request parts wait for the task, and resumes once fewer than two do")
    func readsHeldWhilePartsWait() throws {
        let (channel, end, counter) = try self.channel()
        for number in 1...9 { try channel.writeInbound(self.piece("\(number)")) }
        channel.read()
        #expect(counter.reads == 1, "nine waiting parts hold no read")

        try channel.writeInbound(self.piece("10"))
        channel.read()
        #expect(counter.reads == 1, "the tenth waiting part holds the read back")

        for number in 1...8 { #expect(self.text(end.take()) == "\(number)") }
        #expect(counter.reads == 1, "two parts still wait")
        #expect(self.text(end.take()) == "9")
        #expect(counter.reads == 2, "the read held back goes on once one part waits")
        #expect(self.text(end.take()) == "10")
        #expect(self.text(end.take()) == "nothing")
        channel.read()
        #expect(counter.reads == 3)
        _ = try channel.finish()
    }

    @Test("the parts that came before an error are taken first, then the error; nothing after it")
    func errorAfterParts() throws {
        let (channel, end, _) = try self.channel()
        try channel.writeInbound(self.piece("a"))
        try channel.writeInbound(self.piece("b"))
        channel.pipeline.fireErrorCaught(Failure())
        try channel.writeInbound(self.piece("after the error"))
        #expect(self.text(end.take()) == "a")
        #expect(self.text(end.take()) == "b")
        #expect(self.text(end.take()) == "\(Failure())")
        #expect(self.text(end.take()) == "\(Failure())", "the input stays ended")
        _ = try channel.finish()
    }

    @Test("the input ends with the channel's close, after the parts that came before it")
    func endAtClose() throws {
        let (channel, end, _) = try self.channel()
        try channel.writeInbound(self.piece("a"))
        #expect(self.text(end.take()) == "a")
        #expect(self.text(end.take()) == "nothing")
        try channel.writeInbound(self.piece("b"))
        channel.pipeline.fireChannelInactive()
        #expect(self.text(end.take()) == "b")
        #expect(self.text(end.take()) == "end of input")
        _ = try channel.finish()
    }

    // The channel is used only before the task's first suspension and in the continuation's
    // body, on the thread that made it: an `EmbeddedChannel` is not to be used from another.
    // Each test then does what the other one tests, so that a waiting write that one way
    // failed to end is ended the other way, seen, and the test fails rather than waits forever.

    @Test("a write waits while the channel is not writable, and fails once it closes")
    func waitingWriteFailsAtClose() async throws {
        let (channel, end, _) = try self.channel()
        channel.isWritable = false
        #expect(try end.write([.end]) == false, "a write says the channel is not writable")
        await #expect(throws: ChannelError.ioOnClosedChannel) {
            try await withUnsafeThrowingContinuation { continuation in
                end.awaitWritable(continuation)
                channel.pipeline.fireChannelInactive()
                #expect(throws: ChannelError.ioOnClosedChannel) { try end.write([.end]) }
                channel.isWritable = true
                channel.pipeline.fireChannelWritabilityChanged()
            }
        }
    }

    @Test("a write waiting for the channel goes on once it is writable again")
    func waitingWriteResumes() async throws {
        let (channel, end, _) = try self.channel()
        channel.isWritable = false
        try await withUnsafeThrowingContinuation { continuation in
            end.awaitWritable(continuation)
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            channel.pipeline.fireChannelInactive()
        }
    }
}
