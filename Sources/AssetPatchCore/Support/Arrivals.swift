import Glibc

/// A table that fills while other threads work, and whose reader can wait for an entry: what a
/// fetch has kept so far, used by work that runs beside the fetch. Once `close`d (the fetch
/// done, or given up), a wait for what is not there returns at once.
final class Arrivals<Key: Hashable, Value>: @unchecked Sendable {  // `table` and `closed` are only touched with the condition's mutex held
    private let condition = Condition()
    private var table: [Key: Value]
    private var closed = false

    init(_ initial: [Key: Value] = [:]) { table = initial }

    func put(_ key: Key, _ value: Value) {
        condition.locked {
            table[key] = value
            condition.broadcast()
        }
    }

    /// Nothing more arrives: a wait for what is not there ends.
    func close() {
        condition.locked {
            closed = true
            condition.broadcast()
        }
    }

    var all: [Key: Value] { condition.locked { table } }

    /// The first of `keys` there and its value, waiting until one arrives; nil once the table
    /// is closed without any of them. Throws when `cancel` is (checked every 50 ms, and before
    /// a closed table answers: work stopped because the fetch failed is told so).
    func wait(forAny keys: [Key], cancel: CancelToken) throws -> (key: Key, value: Value)? {
        try condition.locked {
            while true {
                for key in keys {
                    if let value = table[key] { return (key, value) }
                }
                try cancel.check()
                if closed { return nil }
                condition.wait(until: monotonicMillis() + 50)
            }
        }
    }
}
