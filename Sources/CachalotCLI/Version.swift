extension CachalotCommand {
    /// This release's version, the one place it is written: `cachalot --version` prints it, and
    /// the newest entry of CHANGELOG.md names it (a test holds the two together).
    static let version = "0.2.0-dev"
}
