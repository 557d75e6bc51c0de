import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import CachalotServer

@Suite("ServerCodec: requests one at a time, responses framed")
struct ServerCodecTests {
    /// Records what the codec hands on, and counts the reads it lets through.
    final class Recorder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ServerRequestPart
        var parts: [String] = []
        var errors = 0
        var readCompletes = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .request(let request): self.parts.append("whole \(request.head.uri)")
            case .head(let head): self.parts.append("head \(head.uri)")
            case .body: self.parts.append("body")
            case .end: self.parts.append("end")
            }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            self.readCompletes += 1
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.errors += 1
        }
    }

    /// Counts the reads the codec lets through, and takes a close of the output itself (an
    /// `EmbeddedChannel` would close whole), so that the codec's own handling of it is seen.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = IOData
        var reads = 0

        func read(context: ChannelHandlerContext) {
            self.reads += 1
            context.read()
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            guard mode == .output else { return context.close(mode: mode, promise: promise) }
            promise?.succeed(())
        }
    }

    private func channel() throws -> (EmbeddedChannel, Recorder, ReadCounter) {
        let recorder = Recorder()
        let counter = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([counter, ServerCodec(), recorder])
        return (channel, recorder, counter)
    }

    private func request(
        _ uri: String,
        method: HTTPMethod = .GET,
        version: HTTPVersion = .http1_1
    )
        -> [HTTPServerRequestPart]
    {
        [.head(HTTPRequestHead(version: version, method: method, uri: uri)), .end(nil)]
    }

    /// Every byte written so far, as text.
    private func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { continue }
            text += String(buffer: buffer)
        }
        return text
    }

    private func head(
        _ status: HTTPResponseStatus,
        _ fields: [(String, String)] = [],
        version: HTTPVersion = .http1_1
    )
        -> HTTPResponseHead
    {
        HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields))
    }

    @Test("a pipelined request, and the reads after it, wait until the response before it has ended")
    func pipelinedRequestsWait() throws {
        let (channel, recorder, counter) = try self.channel()
        for part in self.request("/a") + self.request("/b") { try channel.writeInbound(part) }
        #expect(recorder.parts == ["head /a", "end"])
        let readsBefore = counter.reads
        channel.read()
        #expect(counter.reads == readsBefore, "a read is held while a response is awaited")

        let readCompletes = recorder.readCompletes
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [Data("a".utf8)]))
        // /b's head and end waited together: they go on as one part.
        #expect(recorder.parts == ["head /a", "end", "whole /b"])
        #expect(recorder.readCompletes == readCompletes + 1, "what waited is handed on with a read's completion")
        #expect(counter.reads == readsBefore, "still held: /b's response is awaited")
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [Data("b".utf8)]))
        #expect(counter.reads == readsBefore + 1, "the held read goes once nothing is awaited")
        #expect(
            try self.written(channel)
                == "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na" + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb"
        )
    }

    /// `parts` as one read of the connection: each handed to the pipeline, then the read's completion.
    private func read(_ parts: [HTTPServerRequestPart], into channel: EmbeddedChannel) throws {
        for part in parts { channel.pipeline.syncOperations.fireChannelRead(NIOAny(part)) }
        channel.pipeline.syncOperations.fireChannelReadComplete()
        try channel.throwIfErrorCaught()
    }

    @Test("a GET or HEAD read to its end in one read goes on whole; with a body, or an end still to come, in parts")
    func wholeRequests() throws {
        let (channel, recorder, _) = try self.channel()
        try self.read(self.request("/get"), into: channel)
        #expect(recorder.parts == ["whole /get"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))

        // Its head alone when the read completes: the rest comes in another read.
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/later")
        try self.read([.head(head)], into: channel)
        #expect(recorder.parts == ["whole /get", "head /later"])
        try self.read([.end(nil)], into: channel)
        #expect(recorder.parts == ["whole /get", "head /later", "end"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))

        // A body in the same read: the head goes before it.
        try self.read([.head(head), .body(ByteBuffer(string: "x")), .end(nil)], into: channel)
        #expect(recorder.parts.suffix(3) == ["head /later", "body", "end"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))

        // Other methods go in parts even without a body.
        try self.read(self.request("/delete", method: .DELETE), into: channel)
        #expect(recorder.parts.suffix(2) == ["head /delete", "end"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))
        try self.read(self.request("/head", method: .HEAD), into: channel)
        #expect(recorder.parts.last == "whole /head")
    }

    @Test("a request's body goes on after its response ended early (a 413), and the next request after it")
    func earlyResponse() throws {
        let (channel, recorder, _) = try self.channel()
        try channel.writeInbound(
            HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/p"))
        )
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.payloadTooLarge)), body: []))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "x")))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        for part in self.request("/next") { try channel.writeInbound(part) }
        #expect(recorder.parts == ["head /p", "body", "end", "head /next", "end"])
    }

    @Test("a parse error after a request waits for its response; one with nothing awaited goes at once")
    func parserErrors() throws {
        let (channel, recorder, _) = try self.channel()
        channel.pipeline.fireErrorCaught(RequestParseError.malformed("a field name that is not a token"))
        #expect(recorder.errors == 1)

        let (second, secondRecorder, _) = try self.channel()
        for part in self.request("/a") { try second.writeInbound(part) }
        second.pipeline.fireErrorCaught(RequestParseError.malformed("a field name that is not a token"))
        #expect(secondRecorder.errors == 0)
        try second.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))
        #expect(secondRecorder.errors == 1)
    }

    @Test("a head without Content-Length is chunked for HTTP/1.1 and delimited by the close for HTTP/1.0")
    func framing() throws {
        let (channel, _, _) = try self.channel()
        for part in self.request("/a") { try channel.writeInbound(part) }
        channel.writeAndFlush(ResponsePart.head(self.head(.ok, [("X", "1")])), promise: nil)
        try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "abcdefghijklmnopq")))
        try channel.writeOutbound(ResponsePart.end)
        #expect(
            try self.written(channel)
                == "HTTP/1.1 200 OK\r\nX: 1\r\ntransfer-encoding: chunked\r\n\r\n11\r\nabcdefghijklmnopq\r\n0\r\n\r\n"
        )

        for part in self.request("/b", version: .http1_0) { try channel.writeInbound(part) }
        channel.writeAndFlush(ResponsePart.head(self.head(.ok, version: .http1_0)), promise: nil)
        try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "abc")))
        try channel.writeOutbound(ResponsePart.end)
        #expect(try self.written(channel) == "HTTP/1.0 200 OK\r\n\r\nabc")
    }

    @Test("a head written alone is flushed with its body's first piece when that follows in the loop's queued jobs")
    func headFlushedWithFirstPiece() throws {
        let (channel, _, _) = try self.channel()
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
        for part in self.request("/a") { try channel.writeInbound(part) }
        channel.write(ResponsePart.head(self.head(.ok, [("Content-Length", "3")])), promise: nil)
        channel.flush()
        #expect(try self.written(channel) == "", "the head's flush is put off")
        channel.write(ResponsePart.body(ByteBuffer(string: "abc")), promise: nil)
        channel.flush()
        #expect(try self.written(channel) == head + "abc", "the piece's flush sends both")
        channel.write(ResponsePart.end, promise: nil)
        channel.flush()
        channel.embeddedEventLoop.run()
        #expect(try self.written(channel) == "", "the put-off flush has nothing left to send")

        // No piece follows: the head goes alone once the loop has run its queued jobs.
        for part in self.request("/b") { try channel.writeInbound(part) }
        channel.write(ResponsePart.head(self.head(.ok, [("Content-Length", "3")])), promise: nil)
        channel.flush()
        #expect(try self.written(channel) == "")
        channel.embeddedEventLoop.run()
        #expect(try self.written(channel) == head)
        try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "abc")))
        try channel.writeOutbound(ResponsePart.end)
        #expect(try self.written(channel) == "abc")

        // A close of the output sends a head whose flush was put off first.
        for part in self.request("/c") { try channel.writeInbound(part) }
        channel.write(ResponsePart.head(self.head(.ok, [("Content-Length", "3")])), promise: nil)
        channel.flush()
        channel.close(mode: .output, promise: nil)
        #expect(try self.written(channel) == head)
    }

    @Test("a response to HEAD keeps its Content-Length and carries no body; a 304 and a 204 carry neither")
    func bodiless() throws {
        let (channel, _, _) = try self.channel()
        for part in self.request("/h", method: .HEAD) { try channel.writeInbound(part) }
        channel.writeAndFlush(ResponsePart.head(self.head(.ok, [("Content-Length", "5")])), promise: nil)
        #expect(throws: NIOHTTPResponseEncoderError.responseBodyNotAllowed) {
            try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "hello")))
        }
        try channel.writeOutbound(ResponsePart.end)
        #expect(try self.written(channel) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")

        for part in self.request("/n") { try channel.writeInbound(part) }
        try channel.writeOutbound(
            ResponsePart.whole(.head(self.head(.notModified, [("Content-Length", "5"), ("ETag", "\"e\"")])), body: [])
        )
        #expect(try self.written(channel) == "HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n\r\n")

        for part in self.request("/z") { try channel.writeInbound(part) }
        channel.writeAndFlush(
            ResponsePart.head(self.head(.noContent, [("Content-Length", "3"), ("Transfer-Encoding", "chunked")])),
            promise: nil
        )
        #expect(throws: NIOHTTPResponseEncoderError.responseBodyNotAllowed) {
            try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "abc")))
        }
        try channel.writeOutbound(ResponsePart.end)
        #expect(try self.written(channel) == "HTTP/1.1 204 No Content\r\n\r\n")
    }

    @Test("a whole response gets its body's length, in one buffer when small and in slices when large")
    func wholeResponses() throws {
        let (channel, _, _) = try self.channel()
        for part in self.request("/s") { try channel.writeInbound(part) }
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [Data("ab".utf8), Data("cd".utf8)]))
        let small = try channel.readOutbound(as: IOData.self)
        #expect(try channel.readOutbound(as: IOData.self) == nil, "one buffer")
        guard case .byteBuffer(let buffer) = small else {
            Issue.record("no buffer")
            return
        }
        #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd")

        let large = Data(repeating: 7, count: ServerCodec.largestInlineBody + 1)
        for part in self.request("/l") { try channel.writeInbound(part) }
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [large]))
        var buffers: [ByteBuffer] = []
        while case .byteBuffer(let buffer)? = try channel.readOutbound(as: IOData.self) { buffers.append(buffer) }
        #expect(String(buffer: buffers[0]) == "HTTP/1.1 200 OK\r\nContent-Length: \(large.count)\r\n\r\n")
        #expect(Data(buffers.dropFirst().flatMap { $0.readableBytesView }) == large)
    }

    @Test(
        "a kept head written with its fields prepared gives the same bytes as written from NIO's head",
        arguments: [
            (HTTPMethod.GET, HTTPVersion.http1_1, false, true), (.GET, .http1_1, true, true),
            (.HEAD, .http1_1, false, true), (.GET, .http1_0, true, false), (.HEAD, .http1_1, false, false),
        ]
    )
    func preparedHeads(method: HTTPMethod, version: HTTPVersion, closing: Bool, withLength: Bool) throws {
        var response = HTTPResponse(status: .ok)
        response.headerFields[.contentType] = "text/plain"
        if withLength { response.headerFields[.contentLength] = "5" }
        response.headerFields[.date] = "Sun, 06 Nov 1994 08:49:37 GMT"
        var head = ClientHead(ClientHead.Kept(response, knownLength: true, via: "1.1 c").writingFields())
        head.finish(age: 3, cacheStatus: .hit("c"))
        let body = method == .HEAD ? [] : [Data("hello".utf8)]
        var outputs: [String] = []
        for whole in [
            head.head(version: version, closing: closing), .head(head.nioHead(version: version, closing: closing)),
        ] {
            let (channel, _, _) = try self.channel()
            for part in self.request("/k", method: method, version: version) { try channel.writeInbound(part) }
            try channel.writeOutbound(ResponsePart.whole(whole, body: body))
            outputs.append(try self.written(channel))
        }
        guard case .prepared = head.head(version: version, closing: closing) else {
            Issue.record("a kept head of a 200 is prepared")
            return
        }
        #expect(outputs[0] == outputs[1])
        #expect(outputs[0].contains("Age: 3\r\nCache-Status: c; hit\r\n"))
        #expect(outputs[0].hasSuffix(method == .HEAD ? "\r\n\r\n" : "\r\n\r\nhello"))
    }

    @Test("a kept head whose status has no body is not prepared: its Content-Length must go")
    func unpreparedHeads() {
        var response = HTTPResponse(status: .noContent)
        response.headerFields[.contentLength] = "0"
        let head = ClientHead(ClientHead.Kept(response, knownLength: true, via: "1.1 c").writingFields())
        guard case .head = head.head(version: .http1_1, closing: false) else {
            Issue.record("a 204 is written from NIO's head")
            return
        }
    }

    @Test("after the output is closed, nothing more is handed on")
    func outputClosed() throws {
        let (channel, recorder, _) = try self.channel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        for part in self.request("/a") + self.request("/b") { try channel.writeInbound(part) }
        try channel.close(mode: .output).wait()
        #expect(channel.isActive, "only the output closed")
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))
        for part in self.request("/c") { try channel.writeInbound(part) }
        #expect(recorder.parts == ["head /a", "end"])
    }

    @Test(
        "after a response that closes the connection, nothing more is handed on (RFC 9112 §9.6)",
        arguments: [
            (HTTPVersion.http1_1, [("Connection", "close"), ("Content-Length", "0")]),
            (HTTPVersion.http1_0, [("Connection", "keep-alive, close"), ("Content-Length", "0")]),
            // Delimited by the close: whatever followed would be read as its body.
            (HTTPVersion.http1_0, []),
        ]
    )
    func closingResponse(version: HTTPVersion, fields: [(String, String)]) throws {
        // A whole response gets a Content-Length: only the one in parts ends with the connection.
        for whole in fields.isEmpty ? [false] : [false, true] {
            let (channel, recorder, counter) = try self.channel()
            for part in self.request("/a", version: version) + self.request("/b", version: version) {
                try channel.writeInbound(part)
            }
            let head = self.head(.ok, fields, version: version)
            if whole {
                try channel.writeOutbound(ResponsePart.whole(.head(head), body: [Data("a".utf8)]))
            } else {
                channel.writeAndFlush(ResponsePart.head(head), promise: nil)
                try channel.writeOutbound(ResponsePart.body(ByteBuffer(string: "a")))
                try channel.writeOutbound(ResponsePart.end)
            }
            let reads = counter.reads
            channel.read()
            for part in self.request("/c", version: version) { try channel.writeInbound(part) }
            #expect(recorder.parts == ["head /a", "end"])
            #expect(counter.reads > reads, "what follows is read and dropped, not left to reset the close")
        }
    }

    /// Answers a request for a path under `/hit` at once, as `ImmediateResponder` answers a
    /// memory hit, from inside the codec's handing on; one under `/hit/close` closes the
    /// connection after it.
    final class ImmediateHits: ImmediateAnswering {
        var asked: [String] = []

        func answer(_ request: inout ServerRequest) -> ImmediateAnswer? {
            self.asked.append(request.head.uri)
            guard request.head.uri.hasPrefix("/hit") else { return nil }
            let closing = request.head.uri.hasPrefix("/hit/close")
            let fields = closing ? HTTPHeaders([("Connection", "close")]) : HTTPHeaders()
            return ImmediateAnswer(
                head: .head(HTTPResponseHead(version: .http1_1, status: .ok, headers: fields)),
                body: [Data(request.head.uri.utf8)],
                closing: closing
            )
        }
    }

    /// A codec that asks `ImmediateHits`, with a recorder after it.
    private func answeringChannel() throws -> (EmbeddedChannel, Recorder, ImmediateHits) {
        let recorder = Recorder()
        let hits = ImmediateHits()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([ServerCodec(answers: hits), recorder])
        return (channel, recorder, hits)
    }

    @Test("requests that waited are answered at once, in order, while they are handed on, up to one that is not")
    func answeredWhileHandedOn() throws {
        let (channel, recorder, _) = try self.answeringChannel()
        for uri in ["/miss", "/hit1", "/hit2", "/miss2", "/hit3"] {
            for part in self.request(uri) { try channel.writeInbound(part) }
        }
        #expect(recorder.parts == ["head /miss", "end"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [Data("/miss".utf8)]))
        #expect(recorder.parts == ["head /miss", "end", "whole /miss2"])
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: [Data("/miss2".utf8)]))
        let bodies = try self.written(channel).components(separatedBy: "\r\n\r\n").dropFirst().map {
            $0.prefix(while: { $0 != "H" })
        }
        #expect(bodies == ["/miss", "/hit1", "/hit2", "/miss2", "/hit3"])
    }

    @Test("a read answered wholly at once passes no read's end on; one with a request handed on does")
    func readsAnsweredAtOnce() throws {
        let (channel, recorder, hits) = try self.answeringChannel()
        try self.read(self.request("/hit1") + self.request("/hit2"), into: channel)
        #expect(hits.asked == ["/hit1", "/hit2"])
        #expect(recorder.parts.isEmpty)
        #expect(recorder.readCompletes == 0, "nothing went on, so the connection's task has nothing to deliver")
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
        #expect(try self.written(channel) == answer + "/hit1" + answer + "/hit2")

        try self.read(self.request("/hit3") + self.request("/miss"), into: channel)
        #expect(recorder.parts == ["whole /miss"])
        #expect(recorder.readCompletes == 1)
        // A POST is not asked about: it goes on in parts.
        try channel.writeOutbound(ResponsePart.whole(.head(self.head(.ok)), body: []))
        try self.read(self.request("/hit4", method: .POST), into: channel)
        #expect(hits.asked == ["/hit1", "/hit2", "/hit3", "/miss"])
        #expect(recorder.parts == ["whole /miss", "head /hit4", "end"])
    }

    @Test("an answer given at once that closes the connection closes it once written, and what follows goes nowhere")
    func closingAnswerGivenAtOnce() throws {
        let (channel, recorder, hits) = try self.answeringChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try self.read(self.request("/hit/close") + self.request("/hit/after"), into: channel)
        #expect(hits.asked == ["/hit/close"], "what follows a response that closes is not a request")
        #expect(recorder.parts.isEmpty)
        let answer = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\n/hit/close"
        #expect(try self.written(channel) == answer)
        #expect(!channel.isActive, "closed once the answer was written")
    }
}
