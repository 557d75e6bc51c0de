import Hummingbird

// A fixed 1 KB answer: what Hummingbird 2 costs per request with no work of the handler's own.
let body = ByteBuffer(repeating: 65, count: 1000)
let router = Router()
router.get("/fixed") { _, _ -> Response in
    Response(status: .ok, headers: [.cacheControl: "max-age=3600"], body: .init(byteBuffer: body))
}
let port = Int(CommandLine.arguments.dropFirst().first ?? "18090") ?? 18090
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
try await app.runService()
