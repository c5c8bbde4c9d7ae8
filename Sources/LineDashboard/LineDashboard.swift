import Batch
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `bledfu line serve`: a read-only web page for the line's supervisor (docs/batch.md, "The dashboard").
///
/// Routes (GET only; anything else is 405/404, so the page can change nothing):
/// - `/` the page, `/app.js` its script, `/app.css` its style (constants in ``DashboardPage``);
/// - `/api/snapshot` the line as JSON (``LineSnapshot`` plus the database's name without its password);
/// - `/events` server-sent events: the snapshot again whenever it changed, looked up every `refresh` on the
///   injected clock (a database tells nobody when it changes; PostgreSQL's LISTEN would, SQLite has nothing alike).
///
/// Every string from a device reaches the page as JSON data and is put in the DOM as text (`textContent`), never as
/// markup; the Content-Security-Policy forbids inline scripts on top of that.
public struct LineDashboard: Sendable {
    public struct Page: Sendable, Codable, Equatable {
        public var database: String
        public var snapshot: LineSnapshot
    }

    /// Where the database is, without its password.
    public var database: String
    public var snapshot: @Sendable () async throws -> LineSnapshot
    public var clock: any Clock<Duration> = ContinuousClock()
    public var refresh: Duration = .seconds(1)
    public var logger = Logger(label: "bledfu.line.dashboard")

    public init(database: String, snapshot: @escaping @Sendable () async throws -> LineSnapshot) {
        self.database = database
        self.snapshot = snapshot
    }

    /// Only the page's own script, style and connections; no inline script, no framing.
    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; frame-ancestors 'none'"

    static var securityHeaders: HTTPFields {
        var headers: HTTPFields = [
            .contentSecurityPolicy: contentSecurityPolicy,
            .cacheControl: "no-store",
        ]
        if let nosniff = HTTPField.Name("X-Content-Type-Options") { headers[nosniff] = "nosniff" }
        return headers
    }

    /// The JSON the page reads (sorted keys: equal snapshots are equal text).
    public func pageJSON() async throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(Page(database: database, snapshot: try await snapshot()))
        return String(decoding: data, as: UTF8.self)
    }

    func text(_ body: String, type: String) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }

    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/") { _, _ in text(DashboardPage.html, type: "text/html; charset=utf-8") }
        router.get("/app.js") { _, _ in text(DashboardPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/app.css") { _, _ in text(DashboardPage.style, type: "text/css; charset=utf-8") }
        router.get("/api/snapshot") { _, _ in
            do {
                return text(try await pageJSON(), type: "application/json")
            } catch {
                throw HTTPError(.serviceUnavailable, message: "the line database cannot be read: \(error)")
            }
        }
        router.get("/events") { _, _ in
            var headers = Self.securityHeaders
            headers[.contentType] = "text/event-stream"
            let dashboard = self
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    var last = ""
                    while !Task.isCancelled {
                        let json = (try? await dashboard.pageJSON()) ?? last
                        if json != last {
                            try await writer.write(ByteBuffer(string: "event: snapshot\ndata: \(json)\n\n"))
                            last = json
                        } else {
                            try await writer.write(ByteBuffer(string: ": still here\n\n"))
                        }
                        do {
                            try await dashboard.clock.sleep(for: dashboard.refresh)
                        } catch {
                            break
                        }
                    }
                    try await writer.finish(nil)
                })
        }
        return router
    }

    /// Serves until cancelled (or SIGINT/SIGTERM). `started` gets the bound port (useful with port 0).
    public func serve(host: String, port: Int, started: @escaping @Sendable (Int) -> Void) async throws {
        let app = Application(
            router: router(), configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "bledfu-line"),
            onServerRunning: { channel in started(channel.localAddress?.port ?? port) }, logger: logger)
        try await app.runService()
    }
}
