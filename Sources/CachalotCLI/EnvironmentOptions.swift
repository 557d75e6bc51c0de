import ArgumentParser
import Foundation

/// Options that environment variables may give, for a command run by a service manager (a
/// systemd unit's `EnvironmentFile`, a container's environment), where secrets must stay off the
/// command line that every local user can read.
///
/// Each variable becomes its option before the command line is parsed, so that a value from the
/// environment is checked exactly as the same value typed would be. An option given on the
/// command line wins over its variable; an empty variable counts as unset.
struct EnvironmentOptions {
    /// One option and the variable that may give it.
    struct Option {
        enum Kind {
            /// `--name=value`.
            case value
            /// `--name` when the variable is 1, true, yes or on; nothing when 0, false, no or off.
            case flag
            /// `--name=item` for each item of the variable, split at `separator`.
            case list(separator: Character)
        }

        var variable: String
        var name: String
        var kind: Kind

        init(_ variable: String, _ name: String, _ kind: Kind = .value) {
            self.variable = variable
            self.name = name
            self.kind = kind
        }
    }

    /// The command these options belong to.
    var command: String
    var options: [Option]

    /// `arguments` (the command line without the program's name) with the options the
    /// environment gives added after the command's name, when they are for this command and the
    /// command line does not give them itself.
    ///
    /// - Throws: `ValidationError` naming the variable when a flag's variable is neither on nor off.
    func arguments(_ arguments: [String], environment: [String: String]) throws -> [String] {
        guard arguments.first == self.command else { return arguments }
        let given = arguments.dropFirst().prefix { $0 != "--" }
        var added: [String] = []
        for option in self.options {
            guard let value = environment[option.variable], !value.isEmpty,
                !given.contains(where: { $0 == option.name || $0.hasPrefix(option.name + "=") })
            else { continue }
            switch option.kind {
            case .value:
                added.append("\(option.name)=\(value)")
            case .flag:
                switch value.lowercased() {
                case "1", "true", "yes", "on": added.append(option.name)
                case "0", "false", "no", "off": break
                default:
                    throw ValidationError(
                        "\(option.variable) must be 1 or 0 (it gives \(option.name)); it is \(value)."
                    )
                }
            case .list(let separator):
                for item in value.split(separator: separator) {
                    let item = item.trimmingCharacters(in: .whitespaces)
                    if !item.isEmpty { added.append("\(option.name)=\(item)") }
                }
            }
        }
        return [self.command] + added + arguments.dropFirst()
    }

    /// The variables, for a command's help: `CACHALOT_ORIGIN (--origin), …`.
    var help: String {
        self.options.map { "\($0.variable) (\($0.name))" }.joined(separator: ", ")
    }
}
