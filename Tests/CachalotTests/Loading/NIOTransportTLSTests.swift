import CachalotNIO
import CachalotTesting
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

@testable import Cachalot

/// `NIOTransport` over TLS, against an origin on 127.0.0.1 whose certificate a test CA signed:
/// made with the `openssl` command, as a real deployment's would be.
@Suite("NIOTransport over TLS", .timeLimit(.minutes(1)))
struct NIOTransportTLSTests {
    @Test("an https origin is reached over TLS with a trusted root, and refused without one")
    func https() async throws {
        let directory = try TemporaryDirectory()
        let files = try Self.makeCertificates(in: directory.path)
        let origin = try await Self.startOrigin(certificate: files.leaf, key: files.leafKey)
        defer { origin.close(promise: nil) }
        let port = try #require(origin.localAddress?.port)
        let url = try #require(URL(string: "https://localhost:\(port)/secure"))

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(files.root))
        let trusting = NIOTransport(configuration: .init(tls: tls))
        defer { trusting.shutDown() }
        let reply = try await trusting.send(HTTPRequest(url: url), body: nil)
        var body = Data()
        for try await piece in reply.body { body.append(piece) }
        #expect(reply.response.status.code == 200)
        #expect(body == Data("secure".utf8))

        // The system's roots do not know the test CA: the certificate is refused.
        let strict = NIOTransport()
        defer { strict.shutDown() }
        await #expect {
            _ = try await strict.send(HTTPRequest(url: url), body: nil)
        } throws: { error in
            let code = (error as? HTTPTransportError)?.code
            return code == .connectFailed || code == .connectionClosed
        }
    }

    /// A root CA and a leaf for `localhost` that it signed, as PEM files in `directory`.
    static func makeCertificates(in directory: String) throws -> (root: String, leaf: String, leafKey: String) {
        let root = directory + "/root.pem"
        let rootKey = directory + "/root.key"
        let leaf = directory + "/leaf.pem"
        let leafKey = directory + "/leaf.key"
        let request = directory + "/leaf.csr"
        let extensions = directory + "/leaf.ext"
        try Data("subjectAltName=DNS:localhost\n".utf8).write(to: URL(fileURLWithPath: extensions))
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for arguments in [
            ["req", "-x509"] + curve + [
                "-keyout", rootKey, "-out", root, "-days", "1", "-subj", "/CN=Cachalot Test CA",
            ],
            ["req"] + curve + ["-keyout", leafKey, "-out", request, "-subj", "/CN=localhost"],
            [
                "x509", "-req", "-in", request, "-CA", root, "-CAkey", rootKey, "-CAcreateserial", "-out", leaf,
                "-days", "1", "-extfile", extensions,
            ],
        ] {
            let run = try ChildProcess.start("/usr/bin/openssl", arguments).waitForExit()
            try #require(run.status == 0, "openssl \(arguments.joined(separator: " "))")
        }
        return (root, leaf, leafKey)
    }

    /// An origin on 127.0.0.1 that answers every request with 200 and `secure`, over TLS.
    static func startOrigin(certificate: String, key: String) async throws -> any Channel {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
        )
        let context = try NIOSSLContext(configuration: configuration)
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(SecureAnswer())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// Answers each request's end with 200 and `secure`.
    final class SecureAnswer: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = Self.unwrapInboundIn(data) else { return }
            let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "6"])
            context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "secure")))), promise: nil)
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
