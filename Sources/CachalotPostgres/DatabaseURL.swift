import Cachalot
import Foundation

/// Where a PostgreSQL database is: `postgres://user[:password]@host[:port]/database[?sslmode=…]`,
/// as `psql` and libpq take it (`postgresql://` too). The port defaults to 5432, the database to
/// the user's name, and `sslmode` to `prefer`, as libpq's do. Its description leaves the
/// password out.
public struct DatabaseURL: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address.
    public var host: String
    /// The TCP port. Default: 5432.
    public var port: Int
    /// The user to connect as.
    public var user: String
    /// The password, if the server asks for one. Default: `nil`.
    public var password: String?
    /// The database's name. Default, when read from a URL without a path: the user's name.
    public var database: String
    /// Whether the connection is encrypted. Default: ``Security/prefer``.
    public var security: Security

    /// Whether a connection is encrypted with TLS, as the URL's `sslmode` says.
    public enum Security: String, Sendable, Hashable {
        /// Never (`sslmode=disable`).
        case disable
        /// If the server offers it (`sslmode=prefer`, the default; `allow` reads the same).
        case prefer
        /// Always, without checking the server's certificate (`sslmode=require`), as libpq.
        case require
        /// Always, with the server's certificate verified against the system's trusted roots and
        /// its host name (`sslmode=verify-full`; `verify-ca` reads the same, stricter).
        case verifyFull
    }

    /// Reads a URL.
    ///
    /// - Throws: `CacheError.Code.invalidConfiguration` if it is not a `postgres://` URL with
    ///   a user and a host.
    public init(_ string: String) throws(CacheError) {
        guard let components = URLComponents(string: string),
            ["postgres", "postgresql"].contains(components.scheme?.lowercased()),
            let host = components.host, !host.isEmpty,
            let user = components.user, !user.isEmpty
        else {
            throw CacheError(
                .invalidConfiguration,
                "'\(Self.redacting(string))' is not a database URL: write postgres://user@host[:port]/database."
            )
        }
        self.host = host
        self.port = components.port ?? 5432
        self.user = user
        self.password = components.password
        let path = components.path.drop { $0 == "/" }
        self.database = path.isEmpty ? user : String(path)
        switch components.queryItems?.first(where: { $0.name == "sslmode" })?.value {
        case nil, "prefer", "allow": self.security = .prefer
        case "disable": self.security = .disable
        case "require": self.security = .require
        case "verify-ca", "verify-full": self.security = .verifyFull
        case let mode?:
            throw CacheError(
                .invalidConfiguration,
                "sslmode=\(mode) in '\(Self.redacting(string))' is not one of disable, allow, prefer, require, "
                    + "verify-ca and verify-full."
            )
        }
    }

    /// Names a database by its parts. Nothing is checked or resolved until a connection is made.
    ///
    /// - Parameters:
    ///   - host: The host name or address.
    ///   - port: The TCP port. Default: 5432.
    ///   - user: The user to connect as.
    ///   - password: The password. Default: `nil`, none.
    ///   - database: The database's name.
    ///   - security: Whether the connection is encrypted. Default: ``Security/prefer``.
    public init(
        host: String,
        port: Int = 5432,
        user: String,
        password: String? = nil,
        database: String,
        security: Security = .prefer
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.security = security
    }

    /// What names the database whatever the credentials: its place in the hashing.
    /// Whether the host is this machine: `localhost`, an address in 127.0.0.0/8, or `::1`.
    var isLoopback: Bool {
        let host = self.host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    var identity: String {
        "\(self.host.lowercased()):\(self.port)/\(self.database)"
    }

    /// `postgres://user@host:port/database`: the URL without its password or `sslmode`, for logs.
    public var description: String {
        "postgres://\(self.user)@\(self.host):\(self.port)/\(self.database)"
    }

    /// `string` with anything between `:` and `@` after the scheme left out.
    private static func redacting(_ string: String) -> String {
        guard let at = string.lastIndex(of: "@"), let scheme = string.range(of: "://"),
            let colon = string[scheme.upperBound..<at].firstIndex(of: ":")
        else { return string }
        return string[..<colon] + ":…" + string[at...]
    }
}
